"""``POST /v1/corpora/{id}/uploads``: index files (PDF, DOCX, HTML, Markdown, text, JSON records) in the
background.

The body is JSON (no multipart): ``{"files": [{"name": "report.pdf", "content_base64": "..."}]}``.
Every file is decoded and read by the readers that ``livingrag index`` uses
(:func:`livingrag.io.readers.read_document_bytes`: the title from the first heading or the
metadata, sections from the headings, a title that is only the file's name no entity; a ``.json``
or ``.jsonl`` file's records one document each, as :func:`livingrag.corpus.ingest.read_json` reads
them) before
anything is submitted; one file that cannot be read answers 422 naming every such file with its
reason, and nothing of the call is written. Then one index job holds all the documents, submitted
as ``POST .../index-jobs`` submits its own (:func:`~livingrag.api.routes.passages.submit_documents`):
202 with the job, which the client polls at ``GET /v1/index-jobs/{id}``. A file indexes exactly as
the same file given to ``livingrag index`` (same title, external id, sections and passages).

The request body is at most ``api.max_request_bytes`` (413 before it is parsed, naming the
limit); base64 makes a file about a third larger.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import PurePosixPath

from fastapi import APIRouter, Depends, Path

from livingrag.api.deps import Services, services, tenant_writer
from livingrag.api.errors import COMMON_RESPONSES, ApiError, ErrorResponse
from livingrag.api.routes.common import corpus_of
from livingrag.api.routes.passages import submit_documents
from livingrag.api.schemas import MAX_DOCUMENT_CHARS, UploadBatch, UploadedFile, UploadFileIn, UploadJobOut
from livingrag.corpus.ingest import records_from_bytes
from livingrag.errors import InvalidInput
from livingrag.io.documents import Document
from livingrag.io.readers import DOCUMENT_SUFFIXES, read_document_bytes

router = APIRouter(
    prefix="/v1",
    tags=["passages"],
    responses=COMMON_RESPONSES | {404: {"model": ErrorResponse, "description": "No such corpus for this tenant."}},
)

RECORD_SUFFIXES = (".json", ".jsonl")
"""Records files: each of their records is a document (a list of records, an object of title ->
text, or JSON lines), read as ``livingrag index`` reads them."""
_DATA_URL = re.compile(r"^data:[^,]*;base64,", re.IGNORECASE)
SHOWN_ERRORS = 20
"""Unreadable files named one by one in a 422 (the rest are counted)."""


def _decode(f: UploadFileIn) -> bytes:
    text = _DATA_URL.sub("", f.content_base64, count=1)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput(f"{f.name}: content_base64 is not base64 ({exc})") from None


def read_upload(f: UploadFileIn) -> tuple[list[Document], int]:
    """The documents in one uploaded file (one, or a records file's) and the file's size;
    :class:`InvalidInput` naming the file and what is wrong with it otherwise."""
    data = _decode(f)
    if not data.strip():
        raise InvalidInput(f"{f.name}: the file is empty (an empty file has nothing to read)")
    if PurePosixPath(f.name).suffix.lower() in RECORD_SUFFIXES:
        docs = records_from_bytes(f.name, data)
    else:
        docs = [read_document_bytes(f.name, data)]
    for doc in docs:
        if len(doc.text) > MAX_DOCUMENT_CHARS:
            what = "the document's" if len(docs) == 1 else f"{doc.source or 'a record'}:"
            raise InvalidInput(
                f"{f.name}: {what} text is {len(doc.text):,} characters; the limit of one document is "
                f"{MAX_DOCUMENT_CHARS:,} (split the file)"
            )
    return docs, len(data)


@router.post(
    "/corpora/{corpus_id}/uploads",
    status_code=202,
    response_model=UploadJobOut,
    summary="Upload files (PDF, DOCX, HTML, Markdown, text) and index them in the background; poll the job",
    description='JSON body `{"files": [{"name": "report.pdf", "content_base64": "..."}]}`. Each file is '
    f"read by its suffix ({', '.join(DOCUMENT_SUFFIXES)}) with the readers of `livingrag index`, so it indexes "
    "exactly as that command indexes it. Every file is read first: if any cannot be read (damaged, empty, another "
    "kind of file renamed, an unknown suffix) the answer is 422 naming each such file and why, and nothing is "
    "submitted. Then one index job holds every document (202, as `POST .../index-jobs`); poll "
    "`GET /v1/index-jobs/{id}`. The whole body is at most api.max_request_bytes (413 naming the limit); base64 "
    "makes a file about a third larger.",
    responses={
        409: {"model": ErrorResponse, "description": "The corpus is full (api.max_passages_per_corpus)."},
        413: {"model": ErrorResponse, "description": "The body is over api.max_request_bytes."},
        422: {"model": ErrorResponse, "description": "A file cannot be read (each is named with the reason)."},
        429: {"model": ErrorResponse, "description": "Too many index jobs pending (the tenant's or in all)."},
    },
)
def upload_files(
    body: UploadBatch,
    corpus_id: int = Path(..., ge=1),
    tid: int = Depends(tenant_writer),
    svc: Services = Depends(services),
) -> UploadJobOut:
    info = corpus_of(svc, tid, corpus_id)
    docs: list[Document] = []
    files: list[UploadedFile] = []
    errors: list[str] = []
    for f in body.files:
        try:
            read, size = read_upload(f)
        except InvalidInput as exc:
            errors.append(str(exc))
            continue
        docs.extend(read)
        first = read[0]
        files.append(
            UploadedFile(
                name=f.name,
                title=first.title if len(read) == 1 else f"{len(read)} records",
                title_is_entity=first.title_is_entity,
                sections=sum(len(d.sections) for d in read),
                characters=sum(len(d.text) for d in read),
                size_bytes=size,
                documents=len(read),
            )
        )
    if errors:
        raise ApiError(422, "invalid_input", _unreadable(errors, len(body.files)))
    job = submit_documents(svc, tid, info, docs)
    return UploadJobOut(**job.model_dump(), files=files)


def _unreadable(errors: list[str], total: int) -> str:
    """One message naming every file that cannot be read (the first :data:`SHOWN_ERRORS`)."""
    if total == 1:
        return f"{errors[0]} (nothing was indexed)"
    head = "1 file" if len(errors) == 1 else f"{len(errors)} files"
    shown = errors[:SHOWN_ERRORS]
    more = f"\n  and {len(errors) - len(shown)} more" if len(errors) > len(shown) else ""
    return f"{head} of {total} cannot be read (nothing was indexed):\n  " + "\n  ".join(shown) + more
