"""The experience store's matching, before retrieval (eq. 7-13): candidate preselection in SQL,
exact rescoring in numpy, the fused start activation, the scaffold and the findings.

The pipeline calls, per query::

    m = matcher.match(tenant_id, corpus_id, encoding, activation_threshold=delta)   # before retrieval
    ... retrieval starts from m.start_activation; the prompt gets m.scaffold_summary ...
    matcher.record_use(tenant_id, fused_ids=m.fused_ids, scaffold_id=m.scaffold_id)  # after answering

SQL preselects at most ``candidates_m`` experiences (see
:mod:`livingrag.db.repositories.experience_candidates`); numpy rescoring over them is exact. The
write-back (:mod:`livingrag.experience.store_writeback`) uses the same preselection for its novelty
score, and warms the template cache of eq. 12 with what it stores.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from livingrag.config import Settings
from livingrag.db.engine import Database
from livingrag.db.repositories import experience_candidates as candidates_repo
from livingrag.db.repositories import experiences as repo
from livingrag.errors import InvalidInput
from livingrag.experience.fusion import fuse, fusion_weights, newly_active
from livingrag.experience.matching import apply_decay, decay_factors, retrieval_scores_from_cosines, top_k
from livingrag.experience.scaffold import scaffold_scores, select_findings, select_scaffold
from livingrag.experience.scaffold_policy import scaffolds_shown
from livingrag.experience.sparsify import validate_activation
from livingrag.experience.store_input import positive_id, validate_embedding
from livingrag.experience.template import mask
from livingrag.experience.trust import allows
from livingrag.experience.types import Finding, MatchedExperience, MatchResult, ScaffoldChoice
from livingrag.experience.verifiers import TextEncoder
from livingrag.types import QueryEncoding

log = logging.getLogger(__name__)


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)


def _unit(vector: Any) -> np.ndarray:
    """``v / ||v||`` as a flat float64 array (a zero vector stays zero)."""
    v = np.asarray(vector, dtype=np.float64).reshape(-1)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


class ExperienceMatcher:
    """Match experiences to a query, fuse their activations and select the scaffold and findings
    (eq. 7-13), for one database; keeps the tenants' question-template vectors (eq. 12)."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        *,
        encoder: TextEncoder | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """``encoder`` embeds question templates (default: the configured embedding model, loaded
        on first need). ``clock`` gives the current time (tests)."""
        self.db = db
        self.settings = settings
        self.exp = settings.experience
        self.scaffolds_shown = scaffolds_shown(settings)
        """``experience.scaffold``: False leaves eq. 13's scaffold out of every match (findings stay)."""
        e = settings.experience
        self.templates_needed = (
            self.scaffolds_shown and (e.scaffold_lambda > 0 or e.scaffold_template_floor > 0)
        ) or e.fusion_template_floor > 0
        """Whether matching compares question templates (eq. 12, the template floors): if not, no
        template is embedded, at a match or at a write-back."""
        self._encoder = encoder
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        self._templates: OrderedDict[tuple[int, str], np.ndarray] = OrderedDict()
        """Unit template embeddings of eq. 12 by (tenant, template text) (LRU, ``template_cache_size``):
        a question form a tenant met once, stored or asked, is not embedded again for that tenant in
        this process."""
        self._dims: dict[tuple[int, int], int] = {}

    @property
    def encoder(self) -> TextEncoder:
        """The text encoder (the configured embedding model unless one was given)."""
        if self._encoder is None:
            with self._lock:
                if self._encoder is None:
                    from livingrag.models.embedder import embedder_from_settings

                    m = self.settings.models
                    self._encoder = embedder_from_settings(m, queries=True)  # templates: as the retriever's
        return self._encoder

    def _seeds(self, base: Mapping[int, float]) -> dict[int, float]:
        return dict(
            sorted(((e, w) for e, w in base.items() if w > 0), key=lambda kv: (-kv[1], kv[0]))[
                : self.exp.seed_entities_for_lookup
            ]
        )

    def _check_dim(self, tenant_id: int, corpus_id: int, dim: int) -> None:
        """The query embedding has the corpus's dimension (read once per scope and process; a
        corpus's dimension never changes). ``NotFound`` for a corpus this tenant cannot see."""
        key = (tenant_id, corpus_id)
        if key not in self._dims:
            with self.db.tenant_session(tenant_id) as s:
                self._dims[key] = repo.corpus_dimension_and_version(s, corpus_id)[0]
        if self._dims[key] != dim:
            raise InvalidInput(
                f"query embedding has dimension {dim} but corpus {corpus_id} uses {self._dims[key]}-dimensional "
                "embeddings"
            )

    def preselect(
        self,
        session: Session,
        tenant_id: int,
        corpus_id: int,
        emb: np.ndarray,
        base: Mapping[int, float],
    ) -> candidates_repo.Candidates:
        return candidates_repo.preselect(session, **self._preselect_args(tenant_id, corpus_id, emb, base))

    def _preselect_args(
        self, tenant_id: int, corpus_id: int, emb: np.ndarray, base: Mapping[int, float]
    ) -> dict[str, Any]:
        return dict(
            tenant_id=tenant_id,
            corpus_id=corpus_id,
            embedding=emb,
            seeds=self._seeds(base),
            m=self.exp.candidates_m,
            now=self._clock(),
            rows_per_entity=self.exp.rows_per_entity,
            ef_search=self.exp.hnsw_ef_search,
            alpha=self.exp.alpha,
            entity_hits=self.exp.entity_hits,
        )

    def match(
        self,
        tenant_id: int,
        corpus_id: int,
        encoding: QueryEncoding,
        *,
        activation_threshold: float | None = None,
    ) -> MatchResult:
        """Top-K experiences (eq. 7), the fused start activation a0 (eq. 8-10) and the scaffold
        (eq. 12-13) for one query. ``activation_threshold`` (the retriever's delta) decides which
        entities count as newly activated by fusion (default: any positive weight)."""
        t0 = time.perf_counter()
        tenant_id = positive_id(tenant_id, "tenant_id")
        corpus_id = positive_id(corpus_id, "corpus_id")
        emb = validate_embedding(encoding.embedding)
        base = validate_activation(encoding.base_activation, "base activation")
        self._check_dim(tenant_id, corpus_id, int(emb.shape[0]))
        # on a read standby when there are any (self.db.reader); writes stay on the primary
        rows = candidates_repo.preselect_read(self.db.reader, **self._preselect_args(tenant_id, corpus_id, emb, base))
        timings = {"preselect_ms": _ms(t0)}
        if not rows:
            timings["rescore_ms"] = 0.0
            timings["total_ms"] = _ms(t0)
            return MatchResult(start_activation=dict(base), candidates=0, timings=timings)

        t1 = time.perf_counter()
        ids = [r.id for r in rows]
        sc = retrieval_scores_from_cosines(
            rows.embedding_cosines, base, rows.entity_ids, rows.weights, rows.lengths, self.exp.alpha
        )
        scores = sc.combined
        if self.exp.decay_half_life_days is not None:
            now = self._clock()
            ages = np.array([(now - r.created_at).total_seconds() / 86400.0 for r in rows])
            scores = apply_decay(scores, decay_factors(ages, self.exp.decay_half_life_days))
        order = top_k(ids, scores, self.exp.top_k)
        conf = np.array([rows[i].confidence for i in order])
        exp = self.exp
        lam, tfloor, ftfloor = exp.scaffold_lambda, exp.scaffold_template_floor, exp.fusion_template_floor
        t_tpl = time.perf_counter()
        tsims = self._template_similarities(tenant_id, encoding, rows) if self.templates_needed else np.zeros(len(rows))
        template_ms = _ms(t_tpl)
        # eq. 9-10 over the top K; experiences under the fusion floor (or, with fusion_template_floor,
        # of another question form) keep their place in ``top`` but get weight 0, which fuse() skips.
        # No seed entity, beta = 0 or nothing kept: a0 = a_base.
        kept = scores[order] >= self.exp.fusion_floor
        kept &= np.array([allows(exp.fusion_from, trust=rows[i].trust, gated=rows[i].gated) for i in order], dtype=bool)
        if ftfloor > 0:
            kept &= tsims[order] >= ftfloor
        fusion_applied = bool(base) and max(base.values()) > 0.0 and self.exp.beta > 0.0 and bool(kept.any())
        weights = fusion_weights(scores[order], conf, self.exp.tau_s) * kept if fusion_applied else np.zeros(len(order))
        if fusion_applied:
            a0 = fuse(base, [rows[i].activation for i in order], weights, self.exp.beta, self.exp.top_h)
        else:
            a0 = dict(base)
        added = newly_active(base, a0, activation_threshold or 0.0) if fusion_applied else ()
        top = tuple(
            MatchedExperience(
                id=rows[i].id,
                query=rows[i].query,
                score=float(scores[i]),
                embedding_similarity=float(sc.embedding[i]),
                activation_similarity=float(sc.activation[i]),
                confidence=rows[i].confidence,
                weight=float(w),
                created_at=rows[i].created_at,
                trust=rows[i].trust,
                gated=rows[i].gated,
            )
            for i, w in zip(order, weights, strict=True)
        )
        timings["rescore_ms"] = round(_ms(t1) - template_ms, 3)

        t2 = time.perf_counter()
        # eq. 12-13 and the findings over the experiences that experience.scaffolds_from allows to be shown
        shown_ok = np.array([allows(exp.scaffolds_from, trust=r.trust, gated=r.gated) for r in rows], dtype=bool)
        s_scaf = np.where(shown_ok, scaffold_scores(scores, tsims, lam), -np.inf)
        pick = select_scaffold(s_scaf, self.exp.scaffold_floor, tsims, tfloor) if self.scaffolds_shown else None
        scaffold = None
        if pick is not None:
            scaffold = ScaffoldChoice(
                experience_id=rows[pick].id,
                score=float(s_scaf[pick]),
                retrieval_score=float(scores[pick]),
                template_similarity=float(tsims[pick]),
                summary=rows[pick].summary,
            )
        findings = tuple(
            Finding(experience_id=rows[j].id, retrieval_score=float(scores[j]), summary=rows[j].summary)
            for j in select_findings(
                scores, np.array([i for i in order if shown_ok[i]], dtype=np.int64), exp.findings_floor, exp.findings_k
            )
        )
        timings["scaffold_ms"] = round(_ms(t2) + template_ms, 3)  # template similarities included
        timings["total_ms"] = _ms(t0)
        return MatchResult(
            start_activation=a0,
            top=top,
            scaffold=scaffold,
            findings=findings,
            fusion_applied=fusion_applied,
            added_entities=tuple(added),
            candidates=len(rows),
            timings=timings,
        )

    def _template_similarities(
        self, tenant_id: int, encoding: QueryEncoding, rows: Sequence[candidates_repo.CandidateRow]
    ) -> np.ndarray:
        """``cos(Emb(T(q)), Emb(T(q_k)))`` of eq. 12 for each candidate row. Template vectors come
        from the tenant's cache by template text, else from the question's forward pass (the
        query's own), else from the encoder; all of them are then cached (in memory, LRU, never
        stored)."""
        query_template = mask(encoding.question, encoding.mentions)
        given = encoding.template_embedding if encoding.template_text == query_template else None
        row_texts = [r.query_template or mask(r.query, None) for r in rows]
        known = self._cached_templates(tenant_id, [query_template, *row_texts])
        fresh: dict[str, np.ndarray] = {}
        if query_template not in known and given is not None:
            fresh[query_template] = _unit(given)
        missing = list(dict.fromkeys(t for t in (query_template, *row_texts) if t not in known and t not in fresh))
        if missing:
            vecs = np.asarray(self.encoder.encode(missing), dtype=np.float64)
            fresh |= {t: _unit(v) for t, v in zip(missing, vecs, strict=True)}
        self._cache_templates(tenant_id, fresh)  # the cached ones were marked as used when they were read
        known |= fresh
        q = known[query_template]
        return np.array([float(known[t] @ q) for t in row_texts])

    def template_vector(self, tenant_id: int, template: str) -> np.ndarray | None:
        """The unit embedding of a question template (eq. 11) cached for this tenant, or None: the
        pipeline asks before a question's forward pass, so a question form the tenant met is not
        embedded again."""
        return self._cached_templates(tenant_id, [template]).get(template)

    def _cached_templates(self, tenant_id: int, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The tenant's cached vectors of ``texts`` (each found one becomes the most recently used).
        The cache is keyed by (tenant, template): one tenant's question forms are never another's
        hits, so neither a vector nor the time a hit saves says what other tenants asked."""
        with self._lock:
            found = {t: self._templates[(tenant_id, t)] for t in texts if (tenant_id, t) in self._templates}
            for t in found:
                self._templates.move_to_end((tenant_id, t))
        return found

    def _cache_templates(self, tenant_id: int, vectors: Mapping[str, np.ndarray]) -> None:
        """Put a tenant's unit template vectors into the LRU cache, then trim it to
        ``template_cache_size`` (over all tenants)."""
        cap = self.exp.template_cache_size
        if cap == 0:
            return
        with self._lock:
            for t, v in vectors.items():
                self._templates[(tenant_id, t)] = v
                self._templates.move_to_end((tenant_id, t))
            while len(self._templates) > cap:
                self._templates.popitem(last=False)

    def warm_template(self, tenant_id: int, experience_id: int, template: str | None, given: Any = None) -> None:
        """Put a just-stored experience's template embedding into the cache of eq. 12 now, on the
        write-back thread, so that the next query that meets it does not pay for it on its answer
        path: nothing to do when its text is cached already; else ``given`` (the vector the
        question's forward pass made of this template, by the same query encoder), else embedded here."""
        if not template or not self.templates_needed or self.exp.template_cache_size == 0:
            return
        if self._cached_templates(tenant_id, [template]):
            return
        try:
            raw = given if given is not None else self.encoder.encode([template])[0]
            vec = _unit(raw)
        except Exception as exc:  # the cache is an optimisation: matching embeds it when missing
            log.warning("could not embed the template of experience %s: %s", experience_id, exc)
            return
        self._cache_templates(tenant_id, {template: vec})

    def record_use(
        self,
        tenant_id: int,
        *,
        fused_ids: Sequence[int] = (),
        scaffold_id: int | None = None,
        finding_ids: Sequence[int] = (),
    ) -> int:
        """Count the fusion uses (``match.fused_ids``), the scaffold use (``match.scaffold_id``) and
        the findings shown (``match.finding_ids``, counted as scaffold uses) of one answered query and
        set ``last_used_at``; returns the experiences updated."""
        tenant_id = positive_id(tenant_id, "tenant_id")
        if not fused_ids and scaffold_id is None and not finding_ids:
            return 0
        with self.db.tenant_session(tenant_id) as s:
            return repo.record_use(
                s, fused_ids=fused_ids, scaffold_id=scaffold_id, finding_ids=finding_ids, now=self._clock()
            )
