"""A small fictional corpus written for this project's tests and the load benchmark
(``livingrag bench mixed-load`` seeds it): ten passages about invented films, books, towns and
people; its questions need one or two hops (``livingrag.bench.http_load.DEFAULT_QUESTIONS``)."""

from __future__ import annotations

CORPUS: list[dict[str, str]] = [
    {
        "title": "Silver Harbor",
        "text": "Silver Harbor is a 1961 drama film directed by Marta Quell. "
        "It was shot in Lindenport during the winter.",
    },
    {
        "title": "Marta Quell",
        "text": "Marta Quell (born 3 May 1920 in Brevik) was a Norwegian film director. "
        "Quell studied painting in Oslo before she made films.",
    },
    {
        "title": "Brevik",
        "text": "Brevik is a coastal town in Telemark, Norway. Its harbour was built by Olaf Renning in 1812.",
    },
    {
        "title": "Olaf Renning",
        "text": "Olaf Renning was a Danish engineer who worked in Copenhagen and designed several harbours.",
    },
    {
        "title": "The Glass Orchard",
        "text": "The Glass Orchard is a 1974 novel by Henrik Tallberg. The novel is set in Uppsala.",
    },
    {
        "title": "Henrik Tallberg",
        "text": "Henrik Tallberg (1931 - 2002) was a Swedish novelist born in Kiruna. "
        "He received the Nordic Council Literature Prize in 1979.",
    },
    {
        "title": "Kiruna",
        "text": "Kiruna is the northernmost town in Sweden, known for its iron ore mine operated by LKAB.",
    },
    {
        "title": "Lindenport",
        "text": "Lindenport is a fishing village on the western coast of Finland with a population of 900.",
    },
    {
        "title": "Aurora Quartet",
        "text": "The Aurora Quartet is a string quartet founded in Helsinki in 1988 by Elina Saari.",
    },
    {
        "title": "Elina Saari",
        "text": "Elina Saari is a Finnish violinist. Saari taught at the Sibelius Academy for twenty years.",
    },
]

__all__ = ["CORPUS"]
