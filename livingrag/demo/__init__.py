"""The demo job (`livingrag demo`): its knowledge base, its questions and the run over them."""
