"""The HTTP service: a FastAPI app over the corpus, the answer pipeline and the experience store.

``create_app(settings)`` builds it; ``livingrag serve`` runs it with uvicorn.
"""

from livingrag.api.app import create_app

__all__ = ["create_app"]
