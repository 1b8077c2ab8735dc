"""Answer generation: LLM providers with token accounting, and named, versioned prompts."""
