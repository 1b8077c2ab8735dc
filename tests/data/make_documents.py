"""Makes the document fixtures of tests/data/documents/ (committed; run again only to change them).

    .venv/bin/python tests/data/make_documents.py

* ``annual_review.pdf``: the HTML below printed to PDF by Chromium (headless, no header or
  footer, with the document outline Chromium builds from the headings);
* ``handbook.docx``: built with python-docx (a Title paragraph, Heading 1/2, a table);
* ``ferry_news.html`` and ``onboarding.md`` are written by hand and only checked here;
* ``../running_headers.pdf`` (outside the folder the index test reads): four pages printed by
  Chromium with its default header (date, title) and footer (file URL, page n/N) on every page.

Every fact in them is invented; the tests ask about the PDF's (who runs the Tromsø depot).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent / "documents"

REVIEW_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Nordline Freight Annual Review 2025</title>
<style>body{font-family:sans-serif;font-size:11pt} table{border-collapse:collapse}
td,th{border:1px solid #444;padding:2px 24px;text-align:left}</style></head>
<body>
<h1>Nordline Freight Annual Review 2025</h1>
<p>Nordline Freight moves chilled goods along the Norwegian coast from its head office in Bodø.
In 2025 its forty trucks drove 3.1 million kilometres.</p>
<h2>Depots</h2>
<p>The Tromsø depot opened in March 2024 and is run by Halvard Lien, who came from the Narvik yard.
It loads the night trains to Oslo.</p>
<h3>Cold storage</h3>
<p>Each depot keeps a cold room at minus eighteen degrees for frozen fish.</p>
<h2>Customers</h2>
<table><tr><th>Customer</th><th>Share of revenue</th></tr>
<tr><td>Saltfjord Seafood</td><td>31 percent</td></tr>
<tr><td>Lofoten Dairy</td><td>12 percent</td></tr></table>
</body></html>
"""


def _running_html() -> str:
    """Four pages of varied sentences under one heading per page-long section."""
    subjects = ["The ferry", "The night truck", "The harbour crane", "The depot manager", "A storm warning"]
    verbs = ["reaches", "leaves", "waits for", "calls", "passes"]
    places = ["the north pier", "Saltfjord", "the cold store", "the rail yard", "Kestrel Harbour"]
    body = ""
    for i in range(4):
        sentences = [
            f"{subjects[(i + k) % 5]} {verbs[(2 * i + k) % 5]} {places[(3 * i + k) % 5]} at {6 + k % 12}:{k % 4}5."
            for k in range(60)
        ]
        body += f"<h2>Week {i + 1}</h2><p>{' '.join(sentences)}</p><div style='break-after: page'></div>"
    return f"<html><head><title>Harbour log</title></head><body><h1>Harbour log</h1>{body}</body></html>"


def make_pdf(out: Path, html: str = REVIEW_HTML, *, header_footer: bool = False) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is needed to print the PDF")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "annual_review.html"
        src.write_text(html, encoding="utf-8")
        flags = [] if header_footer else ["--no-pdf-header-footer", "--generate-pdf-document-outline"]
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", *flags, f"--print-to-pdf={out}", src.as_uri()],
            check=True,
            capture_output=True,
            timeout=120,
        )


def make_docx(out: Path) -> None:
    import docx

    d = docx.Document()
    d.core_properties.title = "Driver handbook"
    d.add_heading("Brindlewood Logistics Driver Handbook", level=0)
    d.add_paragraph("Every Brindlewood driver checks the tyres and the tail lift before the first trip of the day.")
    d.add_heading("Rest breaks", level=1)
    d.add_paragraph("After four and a half hours at the wheel a driver stops for forty-five minutes.")
    d.add_heading("Routes", level=2)
    table = d.add_table(rows=3, cols=2)
    for r, (route, lead) in enumerate([("Route", "Lead driver"), ("Kiruna to Luleå", "Ove Sandberg"),
                                       ("Umeå to Sundsvall", "Petra Holm")]):  # fmt: skip
        table.cell(r, 0).text = route
        table.cell(r, 1).text = lead
    d.save(str(out))


def main() -> None:
    HERE.mkdir(exist_ok=True)
    make_pdf(HERE / "annual_review.pdf")
    make_docx(HERE / "handbook.docx")
    make_pdf(HERE.parent / "running_headers.pdf", _running_html(), header_footer=True)
    for name in ("ferry_news.html", "onboarding.md"):
        assert (HERE / name).is_file(), f"{name} is written by hand"
    print(f"wrote {HERE}/annual_review.pdf and handbook.docx")


if __name__ == "__main__":
    main()
