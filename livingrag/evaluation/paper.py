"""The LivingRAG paper's own numbers, transcribed from its tables, to print beside ours.

Units are the paper's: percentages as printed (79.60 means 79.60 %), tokens per query, USD per run,
seconds per query. Keys are the paper's dataset rows. The paper's runs use Qwen3.6 Plus, the
1,000-question subsets (2,417 for MuSiQue-full, 400 for WixQA) and its own corpora; a report places
them beside ours only as the paper's figures, never as ours.
"""

from __future__ import annotations

PAPER = "LivingRAG paper"

DATASET_ROWS: dict[str, str] = {
    "2wikimultihopqa": "2Wiki",
    "hotpotqa": "HotpotQA",
    "musique": "MuSiQue",
    "wixqa": "WixQA",
}
"""Our dataset names -> the paper's row names (``MuSiQue-full`` is chosen explicitly)."""

PAPER_ROWS = ("2Wiki", "HotpotQA", "MuSiQue", "MuSiQue-full", "WixQA")

# Table 1: reuse opportunities (%): entity reuse, graph-neighbourhood reuse, template reuse.
TABLE1: dict[str, tuple[float, float, float]] = {
    "2Wiki": (4.30, 99.70, 96.30),
    "HotpotQA": (26.53, 99.10, 21.82),
    "MuSiQue": (40.34, 95.60, 39.14),
    "MuSiQue-full": (54.10, 96.32, 54.30),
    "WixQA": (76.69, 80.45, 16.04),
}

# Table 2: accuracy (%), (Contain-Acc, LLM-Acc) per method and dataset; None = not reported ("–").
TABLE2: dict[str, dict[str, tuple[float | None, float | None]]] = {
    "Vanilla RAG (Top-5)": {
        "2Wiki": (58.80, 59.40),
        "HotpotQA": (65.20, 77.10),
        "MuSiQue": (34.00, 43.70),
        "MuSiQue-full": (27.35, 41.33),
    },
    "LightRAG": {
        "2Wiki": (60.60, 48.20),
        "HotpotQA": (62.20, 71.70),
        "MuSiQue": (39.20, 49.10),
        "MuSiQue-full": (29.83, 44.89),
    },
    "GFM-RAG": {
        "2Wiki": (75.50, 77.80),
        "HotpotQA": (72.50, 86.10),
        "MuSiQue": (42.70, 52.50),
        "MuSiQue-full": (37.28, 47.75),
    },
    "HippoRAG2": {
        "2Wiki": (76.50, 68.00),
        "HotpotQA": (71.20, 84.60),
        "MuSiQue": (45.40, 52.90),
        "MuSiQue-full": (40.92, 44.06),
    },
    "LinearRAG": {
        "2Wiki": (79.60, 84.40),
        "HotpotQA": (72.90, 86.80),
        "MuSiQue": (48.50, 60.70),
        "MuSiQue-full": (41.00, 52.71),
        "WixQA": (None, 66.00),
    },
    "LivingRAG": {
        "2Wiki": (82.70, 87.00),
        "HotpotQA": (73.20, 88.00),
        "MuSiQue": (50.80, 64.40),
        "MuSiQue-full": (44.39, 58.42),
        "WixQA": (None, 70.25),
    },
}

# Table 3: tokens per query and run cost (USD at $0.50 / $3.00 per million):
# (queries, prompt Linear, prompt Living, completion Linear, completion Living, cost Linear, cost Living).
TABLE3: dict[str, tuple[int, float, float, float, float, float, float]] = {
    "2Wiki": (1000, 6038.2, 6241.6, 1067.6, 906.4, 6.22, 5.84),
    "HotpotQA": (1000, 5779.8, 5985.8, 941.9, 767.0, 5.72, 5.29),
    "MuSiQue": (1000, 5888.4, 6092.4, 2098.8, 1641.7, 9.24, 7.97),
    "MuSiQue-full": (2417, 8639.3, 8861.0, 2223.8, 1643.7, 26.57, 22.63),
    "WixQA": (400, 6633.0, 7412.8, 1653.8, 1378.1, 3.31, 3.14),
}

# Table 4: realised reuse (%): graph transfer, template opportunity (Table 1), realised template reuse.
TABLE4: dict[str, tuple[float, float, float]] = {
    "2Wiki": (0.00, 96.30, 84.15),
    "HotpotQA": (0.00, 21.82, 9.04),
    "MuSiQue": (91.20, 39.14, 40.69),
    "MuSiQue-full": (82.42, 54.30, 50.44),
    "WixQA": (91.50, 16.04, 7.03),
}

# Table 5: ablations, LLM-Acc (%) on 2Wiki, MuSiQue-full, WixQA, and the average completion-token
# reduction against LinearRAG (%, over those three datasets).
TABLE5_COLUMNS = ("2Wiki", "MuSiQue-full", "WixQA")
TABLE5: dict[str, tuple[float, float, float, float]] = {
    "living": (87.00, 58.42, 70.25, 23.6),
    "living-no-fusion": (86.70, 56.32, 67.45, 15.1),
    "living-no-scaffold": (83.80, 56.92, 69.55, 8.3),
    "living-no-gate": (84.60, 55.52, 68.25, 18.0),
}

# Table 6: gates (tau_novel = 0.7, tau_gs = 0.6):
# (questions, NS pass %, GS checked, GS pass %, GS reject, stored).
TABLE6: dict[str, tuple[int, float, int, float, int, int]] = {
    "2Wiki": (1000, 13.80, 138, 72.46, 38, 100),
    "HotpotQA": (1000, 63.30, 633, 86.73, 84, 549),
    "MuSiQue": (1000, 36.30, 363, 86.23, 50, 313),
    "MuSiQue-full": (2417, 21.31, 515, 91.84, 42, 473),
    "WixQA": (400, 39.25, 157, 100.00, 0, 157),
}

# Table 8: MuSiQue experience clusters: (#Q, #chunks, #clusters, coverage %, avg size, max size).
TABLE8: dict[str, tuple[int, int, int, float, float, int]] = {
    "MuSiQue": (1000, 1354, 178, 79.2, 4.4, 21),
    "MuSiQue-full": (2417, 2379, 300, 89.9, 7.2, 58),
}

# Table 15: seconds per query: (LLM s/q, retrieval s/q, retrieval/LLM %, validation s/q or None = N/A).
TABLE15: dict[str, dict[str, tuple[float, float, float, float | None]]] = {
    "2Wiki": {"linear": (30.07, 0.50, 1.7, None), "living": (24.04, 0.54, 2.2, 2.13)},
    "HotpotQA": {"linear": (15.42, 0.72, 4.7, None), "living": (14.45, 0.74, 5.1, 2.35)},
    "MuSiQue": {"linear": (37.23, 1.49, 4.0, None), "living": (33.88, 1.50, 4.4, 6.64)},
}

# Table 16: coverage: (stored, top-K selections, coverage %, scaffold uses, coverage %, max uses).
TABLE16: dict[str, tuple[int, int, float, int, float, int]] = {
    "2Wiki": (100, 4820, 97.00, 984, 85.00, 103),
    "HotpotQA": (549, 2814, 79.60, 984, 58.11, 20),
    "MuSiQue": (313, 2799, 86.90, 983, 70.29, 30),
    "MuSiQue-full": (473, 6828, 93.02, 2401, 81.61, 68),
    "WixQA": (157, 1910, 88.54, 384, 67.52, 20),
}

# Table 17: paired deltas (LivingRAG − LinearRAG) by realised (graph, template) signal:
# (Δ LLM-Acc in points, Δ completion tokens per query). Rows the paper does not list had no sample.
TABLE17: dict[str, dict[tuple[bool, bool], tuple[float, float]]] = {
    "2Wiki": {(False, False): (0.59, -12.8), (False, True): (2.97, -189.1)},
    "MuSiQue-full": {
        (False, False): (0.56, 23.6),
        (True, False): (2.12, -297.2),
        (False, True): (4.73, -1352.9),
        (True, True): (9.81, -964.7),
    },
    "WixQA": {(False, False): (1.03, -155.6), (True, False): (4.23, -272.9), (True, True): (8.39, -454.8)},
}

# Table 18: three orders (the paper order and two permutations), mean and sample std:
# metric -> (Linear, Living) as (mean, std); reuse rates are LivingRAG's. None = not reported.
Pair = tuple[float, float]
TABLE18: dict[str, dict[str, tuple[Pair, Pair] | Pair | None]] = {
    "2Wiki": {
        "contain_acc": ((79.13, 0.42), (83.33, 2.03)),
        "llm_acc": ((83.80, 1.22), (89.40, 5.14)),
        "completion_tokens": ((1038.7, 25.4), (806.4, 92.7)),
        "graph_transfer": (0.00, 0.00),
        "template_reuse": (81.54, 2.69),
    },
    "MuSiQue-full": {
        "contain_acc": ((41.36, 1.12), (44.21, 0.90)),
        "llm_acc": ((53.10, 0.44), (58.09, 0.88)),
        "completion_tokens": ((2231.8, 26.5), (1744.8, 94.4)),
        "graph_transfer": (81.84, 0.55),
        "template_reuse": (50.15, 0.64),
    },
    "WixQA": {
        "contain_acc": None,
        "llm_acc": ((66.25, 1.39), (70.25, 1.00)),
        "completion_tokens": ((1689.4, 38.6), (1403.6, 22.2)),
        "graph_transfer": (91.92, 0.38),
        "template_reuse": (7.29, 0.30),
    },
}
