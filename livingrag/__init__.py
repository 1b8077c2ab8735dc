"""livingrag: Graph-RAG question answering with a writable, gated experience store."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("livingrag")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+local"

__all__ = ["__version__"]
