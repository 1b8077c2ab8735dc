"""The document readers (livingrag.io.readers) and section chunking, without a database.

The fixtures of tests/data/documents/ are a PDF printed by Chromium, a DOCX built with python-docx,
an HTML page with navigation, header, sidebar and footer around its article, and a Markdown file
(tests/data/make_documents.py makes the first two).
"""

from __future__ import annotations

import io
from pathlib import Path

import docx
import pytest

from livingrag.corpus.chunking import chunk_document
from livingrag.corpus.ingest import read_corpus, read_inputs
from livingrag.errors import InvalidInput
from livingrag.io.documents import FILE_SUFFIXES, Document, Section, title_is_file_name
from livingrag.io.readers import DOCUMENT_SUFFIXES, read_document, read_document_bytes
from livingrag.io.readers import pdf as pdf_reader

DOCS = Path(__file__).resolve().parents[1] / "data" / "documents"


def _sections(d: Document) -> list[tuple[tuple[str, ...], str]]:
    return [(s.path, s.text) for s in d.sections]


def test_the_suffix_lists_agree() -> None:
    assert set(DOCUMENT_SUFFIXES) == set(FILE_SUFFIXES)


def test_pdf_printed_by_chromium_keeps_title_sections_and_table() -> None:
    d = read_document(DOCS / "annual_review.pdf")
    assert d.title == "Nordline Freight Annual Review 2025" and d.title_is_entity
    assert d.external_id == "annual_review.pdf"
    paths = [p for p, _ in _sections(d)]
    assert paths == [(), ("Depots",), ("Depots", "Cold storage"), ("Customers",)]
    depots = dict(_sections(d))[("Depots",)]
    assert depots.startswith("The Tromsø depot opened in March 2024 and is run by Halvard Lien")
    assert "office in Bodø" in d.text and "\ufb03" not in d.text  # the "ffi" ligature is letters again
    assert dict(_sections(d))[("Customers",)].splitlines() == [
        "Customer | Share of revenue",
        "Saltfjord Seafood | 31 percent",
        "Lofoten Dairy | 12 percent",
    ]


def test_pdf_without_outline_takes_headings_from_the_type_size(monkeypatch: pytest.MonkeyPatch) -> None:
    with_outline = read_document(DOCS / "annual_review.pdf")
    monkeypatch.setattr(pdf_reader, "_outline", lambda doc: [])
    by_size = read_document(DOCS / "annual_review.pdf")
    assert by_size.title == with_outline.title and _sections(by_size) == _sections(with_outline)


def test_pdf_running_headers_and_footers_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    # Chromium's default header (date, title) and footer (file URL, page n/4) on each of four pages
    path = DOCS.parent / "running_headers.pdf"
    d = read_document(path)
    assert d.title == "Harbour log" and [s.path for s in d.sections] == [(f"Week {i}",) for i in range(1, 5)]
    assert "file:" not in d.text and "Harbour log" not in d.text and "/4" not in d.text
    assert d.sections[0].text.startswith("The ferry reaches the north pier at 6:05.")
    monkeypatch.setattr(pdf_reader, "_running_lines", lambda boxes, pages: set())
    kept = read_document(path)
    assert "file:" in kept.text and len(kept.text.split()) - len(d.text.split()) == 4 * 9  # only those lines went


def test_docx_title_headings_and_table() -> None:
    d = read_document(DOCS / "handbook.docx")
    assert d.title == "Brindlewood Logistics Driver Handbook"  # the Title paragraph, not the metadata
    assert _sections(d) == [
        ((), "Every Brindlewood driver checks the tyres and the tail lift before the first trip of the day."),
        (("Rest breaks",), "After four and a half hours at the wheel a driver stops for forty-five minutes."),
        (
            ("Rest breaks", "Routes"),
            "Route | Lead driver\nKiruna to Luleå | Ove Sandberg\nUmeå to Sundsvall | Petra Holm",
        ),
    ]


def test_html_reads_the_article_not_the_page_around_it() -> None:
    d = read_document(DOCS / "ferry_news.html")
    assert d.title == "Winter timetable for the Saltfjord ferry"
    for boilerplate in ("Home", "Timetables", "Harbourmaster", "Most read", "regatta", "Privacy", "©", "Share on"):
        assert boilerplate not in d.text, boilerplate
    assert "analytics" not in d.text and "margin-right" not in d.text and "<" not in d.text
    sections = dict(_sections(d))
    assert "the ferry MS Teisten leaves Kestrel Harbour at 07:15 and 16:40," in sections[()]
    assert sections[("Fares",)] == "Ticket | Price\nAdult | 85 NOK\nBicycle | 20 NOK"
    assert "captain Ragna Eide" in sections[("Cancellations",)]


def test_markdown_headings_markup_and_tables() -> None:
    d = read_document(DOCS / "onboarding.md")
    assert d.title == "Welcome to the Varik Studio"
    assert "#" not in d.text and "*" not in d.text and "|---" not in d.text
    assert _sections(d) == [
        ((), "Ilse Varik founded the studio in Tallinn in 2019; it designs labels for small breweries."),
        (("Your first week",), "Meet the print team on Monday.\nRead the colour guide before you touch a file."),
        (("Tools",), "Tool | Used for\nInkscape | vector drawings\nScribus | print layouts"),
        (("Tools", "Fonts"), "The studio licenses Vesi Sans for every label."),
    ]


@pytest.mark.parametrize(
    ("text", "title", "from_heading", "paths"),
    [
        # several top headings: the first is the title and stays a section
        ("# One\nfirst\n\n# Two\nsecond\n", "One", True, [("One",), ("Two",)]),
        # front matter gives the title when no single top heading does
        ("---\ntitle: 'The Notes'\n---\n# One\nfirst\n\n# Two\nsecond\n", "The Notes", True, [("One",), ("Two",)]),
        # no heading, no metadata: the file's name, which is no entity
        ("just a line of text\n", "notes", False, [()]),
        # a single lower heading is the title too
        ("## Only\nbody\n", "Only", True, [()]),
        # setext headings and an HTML block
        ("Top\n===\n\n<div>inside <b>html</b></div>\n", "Top", True, [()]),
    ],
)
def test_markdown_title_rules(text: str, title: str, from_heading: bool, paths: list[tuple[str, ...]]) -> None:
    d = read_document_bytes("notes.md", text.encode())
    assert (d.title, d.title_is_entity) == (title, from_heading)
    assert [s.path for s in d.sections] == paths
    assert "<" not in d.text


def test_placeholder_metadata_titles_are_not_used() -> None:
    page = b"<html><head><title>Untitled</title></head><body><p>Plain words.</p></body></html>"
    d = read_document_bytes("page.html", page)
    assert (d.title, d.title_is_entity) == ("page", False)
    named = read_document_bytes("page.html", page.replace(b"Untitled", b"Harbour notes"))
    assert (named.title, named.title_is_entity) == ("Harbour notes", True)


def test_plain_text_is_read_as_today_and_its_file_name_is_no_entity(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("# not a heading in a .txt\nMarta Quell made films.\n")
    (d,) = read_corpus(tmp_path / "notes.txt")
    assert (d.title, d.text, d.external_id, d.title_is_entity) == (
        "notes",
        "# not a heading in a .txt\nMarta Quell made films.",
        "notes.txt",
        False,
    )
    assert not d.sections


def _empty_docx() -> bytes:
    buf = io.BytesIO()
    docx.Document().save(buf)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("broken.pdf", (DOCS / "annual_review.pdf").read_bytes()[:3000], "not a readable PDF, damaged or cut short"),
        ("fake.pdf", b"%PDF-1.7\nthis is not really a pdf\n", "not a readable PDF"),
        ("letter.pdf", b"Dear reader, this is text.", "not a PDF file"),
        ("empty.docx", _empty_docx(), "the document has no text"),
        ("plain.docx", b"just text, not a package", "not a Word .docx document"),
        ("renamed.md", (DOCS / "annual_review.pdf").read_bytes(), "binary data, not text: this is a PDF file"),
        ("noise.md", bytes(range(256)) * 4, "binary data, not text"),
        ("latin1.md", "Malmö".encode("latin-1"), "not UTF-8 text"),
        ("blank.html", b"   \n", "the file is empty"),
        ("nothing.html", b"<html><body><nav>Home</nav></body></html>", "the document has no text"),
    ],
)
def test_unreadable_documents_name_the_file_and_the_reason(
    tmp_path: Path, name: str, content: bytes, expected: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InvalidInput) as ei:
        read_inputs(path)
    assert str(path) in str(ei.value) and expected in str(ei.value), str(ei.value)


def test_a_folder_lists_every_unreadable_file_and_every_skipped_one(tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text("# Good\nFine text.\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "empty.docx").write_bytes(_empty_docx())
    (tmp_path / "sub" / "renamed.md").write_bytes((DOCS / "annual_review.pdf").read_bytes())
    with pytest.raises(InvalidInput) as ei:
        read_inputs(tmp_path)
    msg = str(ei.value)
    assert "2 files cannot be read (nothing was indexed)" in msg
    assert "sub/empty.docx: the document has no text" in msg and "sub/renamed.md: binary data" in msg

    (tmp_path / "sub" / "empty.docx").unlink()
    (tmp_path / "sub" / "renamed.md").unlink()
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n")
    (tmp_path / "corpus.json").write_text("[]")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    result = read_inputs(tmp_path)
    assert [d.title for d in result.documents] == ["Good"]
    reasons = {s.path: s.reason for s in result.skipped}
    assert "not a document type (.png" in reasons["photo.png"]
    assert "indexed on its own" in reasons["corpus.json"]
    assert reasons["1 hidden file(s)"].startswith("names starting with '.'")


def test_an_empty_folder_says_what_it_reads(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text("a,b")
    with pytest.raises(InvalidInput, match=r"the folder has no document files .*skipped: data\.csv"):
        read_inputs(tmp_path)


def test_sections_chunk_with_their_heading_path() -> None:
    doc = Document(
        "Title",
        "",
        external_id="guide.md",
        title_is_entity=False,
        sections=(
            Section((), "intro words here"),
            Section(("Setup",), "one two three four five six seven"),
            Section(("Setup", "Keys"), "x y"),
        ),
    )
    drafts = chunk_document(doc, chunk_tokens=6, overlap=1)
    assert [d.text for d in drafts] == [
        "intro words here",
        "Setup\none two three four five",
        "Setup\nfive six seven",
        "Setup › Keys\nx y",
    ]
    assert [d.external_id for d in drafts] == [f"guide.md#{i}" for i in range(4)]
    assert [d.chunk_index for d in drafts] == [0, 1, 2, 3] and len({d.doc_key for d in drafts}) == 1
    assert not any(d.title_entity for d in drafts)
    (whole,) = chunk_document(doc, chunk_tokens=600, overlap=60)
    assert whole.text == "intro words here\n\nSetup\none two three four five six seven\n\nSetup › Keys\nx y"
    assert whole.external_id == "guide.md" and whole.token_count == 16


def test_documents_without_sections_chunk_as_before() -> None:
    doc = Document("T", "a b c d e f g h i j", external_id="x")
    assert [d.text for d in chunk_document(doc, chunk_tokens=4, overlap=1)] == ["a b c d", "d e f g", "g h i j"]
    (one,) = chunk_document(doc, chunk_tokens=40, overlap=1)
    assert (one.text, one.external_id, one.token_count, one.title_entity) == ("a b c d e f g h i j", "x", 10, True)


@pytest.mark.parametrize(
    ("title", "external_id", "expected"),
    [
        ("notes", "notes.txt", True),
        ("notes", "sub/notes.md#2", True),
        ("Notes", "notes.md", False),
        ("notes", "notes", False),  # a record id, not a file
        ("notes", None, False),
        ("Casablanca", "7", False),
    ],
)
def test_title_is_file_name(title: str, external_id: str | None, expected: bool) -> None:
    assert title_is_file_name(title, external_id) is expected
