"""Experience store: stored question templates, inline query embeddings, unit-normalised entity
weights and the entity-channel index, a half-precision HNSW index (and the helper that creates one
for another dimension), and the SQL analytics views.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import context, op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VIEWS = ("experience_store_growth", "writeback_gate_stats", "experience_reuse_coverage", "experience_health")


def _app_role() -> str:
    role = context.config.attributes.get("app_role", "livingrag_app") if context.config else "livingrag_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"invalid application role name {role!r}")
    return role


def _schema() -> str:
    bind = op.get_bind()
    schema = bind.exec_driver_sql("SELECT current_schema()").scalar_one()
    return f'"{schema}"'


def upgrade() -> None:
    role = _app_role()
    # T(q_k) of eq. 11, masked at write time with the question's NER mentions.
    op.execute("ALTER TABLE experiences ADD COLUMN query_template text")

    # Keep query embeddings inline: pgvector's default EXTERNAL storage moves a 384-d vector of a
    # ~2.5 kB experience row into the TOAST table, so every exact distance and every fetched
    # candidate costs a TOAST lookup. MAIN storage and a 4 kB tuple target keep typical rows whole.
    op.execute("ALTER TABLE experiences ALTER COLUMN query_embedding SET STORAGE MAIN")
    op.execute("ALTER TABLE experiences SET (toast_tuple_target = 4080)")

    # experience_entities.weight now holds each map's unit-normalised weight a~_k[e] / |a~_k|, so
    # that sum(a_base[e] * weight) over shared entities ranks by cos(a_base, a~_k). Backfill rows
    # written before this revision from the experience's activation map.
    op.execute(
        """
        UPDATE experience_entities ee SET weight = (s.w / s.n)::real
        FROM (
          SELECT x.id, kv.key, kv.value::float8 AS w,
                 sqrt(sum(kv.value::float8 ^ 2) OVER (PARTITION BY x.id)) AS n
          FROM experiences x, jsonb_each_text(x.activation) kv
          WHERE jsonb_typeof(x.activation -> kv.key) = 'number'
        ) s
        WHERE ee.experience_id = s.id AND ee.entity_id::text = s.key AND s.n > 0
        """
    )
    # The entity channel reads the strongest rows of each seed entity: (scope, entity, weight desc),
    # covering experience_id for index-only scans. It supersedes the plain lookup index of 0001.
    op.execute(
        "CREATE INDEX ix_experience_entities_channel ON experience_entities"
        " (tenant_id, corpus_id, entity_id, weight DESC) INCLUDE (experience_id)"
    )
    op.execute("DROP INDEX IF EXISTS ix_experience_entities_lookup")
    # Deleting experiences sets writeback_log.experience_id to NULL: without this index every
    # pruned experience would scan the whole log.
    op.execute(
        "CREATE INDEX ix_writeback_log_experience ON writeback_log (experience_id) WHERE experience_id IS NOT NULL"
    )

    # The HNSW index of 0001 indexes full-precision vectors; half precision halves its size and
    # makes filtered scans markedly cheaper (preselection only: candidates are rescored exactly
    # in numpy from the stored full-precision vectors).
    op.execute("DROP INDEX IF EXISTS ix_experiences_query_embedding_hnsw_384")
    op.execute(
        "CREATE INDEX ix_experiences_query_embedding_hnsw_384 ON experiences"
        " USING hnsw ((query_embedding::halfvec(384)) halfvec_cosine_ops) WHERE embedding_dim = 384"
    )

    # HNSW indexes need a fixed dimension: one partial expression index per dimension in use.
    # The application role may ask for one (e.g. when it creates a corpus with a new embedding
    # model); the function runs with the owner's rights and builds nothing but that index.
    op.execute(
        f"""
        CREATE FUNCTION livingrag_ensure_experience_hnsw(dim integer) RETURNS text
          LANGUAGE plpgsql SECURITY DEFINER
          SET search_path = {_schema()}, pg_temp
          AS $$
          DECLARE idx text := 'ix_experiences_query_embedding_hnsw_' || dim;
          BEGIN
            IF dim IS NULL OR dim < 1 OR dim > 4000 THEN
              RAISE EXCEPTION 'HNSW index dimension must lie in [1, 4000], got %', dim;
            END IF;
            EXECUTE format(
              'CREATE INDEX IF NOT EXISTS %I ON experiences USING hnsw ((query_embedding::halfvec(%s)) '
              'halfvec_cosine_ops) WHERE embedding_dim = %s', idx, dim, dim);
            RETURN idx;
          END $$;
        REVOKE ALL ON FUNCTION livingrag_ensure_experience_hnsw(integer) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION livingrag_ensure_experience_hnsw(integer) TO {role};
        """
    )

    # Analytics views. security_invoker: row-level security of the underlying tables applies to
    # whoever queries the view, so a tenant session sees only its own rows.
    op.execute(
        """
        CREATE VIEW experience_store_growth WITH (security_invoker = true) AS
        WITH present AS (
          SELECT tenant_id, corpus_id, (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS stored
          FROM experiences GROUP BY 1, 2, 3
        ), decisions AS (
          SELECT tenant_id, corpus_id, (created_at AT TIME ZONE 'UTC')::date AS day,
                 count(*) FILTER (WHERE decision <> 'dropped') AS candidates,
                 count(*) FILTER (WHERE decision = 'stored') AS written
          FROM writeback_log GROUP BY 1, 2, 3
        )
        SELECT tenant_id, corpus_id, day,
               coalesce(p.stored, 0) AS stored,
               sum(coalesce(p.stored, 0)) OVER w AS cumulative_stored,
               coalesce(d.candidates, 0) AS candidates,
               coalesce(d.written, 0) AS written
        FROM present p FULL JOIN decisions d USING (tenant_id, corpus_id, day)
        WINDOW w AS (PARTITION BY tenant_id, corpus_id ORDER BY day);

        CREATE VIEW writeback_gate_stats WITH (security_invoker = true) AS
        SELECT tenant_id, corpus_id,
               count(*) FILTER (WHERE decision IN ('stored', 'rejected_novelty', 'rejected_grounding')) AS questions,
               round(100.0 * count(*) FILTER (WHERE decision IN ('stored', 'rejected_grounding'))
                     / nullif(count(*) FILTER (WHERE decision IN ('stored', 'rejected_novelty', 'rejected_grounding')), 0),
                     2) AS ns_pass_pct,
               count(*) FILTER (WHERE decision IN ('stored', 'rejected_grounding')) AS gs_checked,
               round(100.0 * count(*) FILTER (WHERE decision = 'stored')
                     / nullif(count(*) FILTER (WHERE decision IN ('stored', 'rejected_grounding')), 0), 2) AS gs_pass_pct,
               count(*) FILTER (WHERE decision = 'rejected_grounding') AS gs_reject,
               count(*) FILTER (WHERE decision = 'stored') AS stored,
               count(*) FILTER (WHERE decision = 'error') AS errors,
               count(*) FILTER (WHERE decision = 'dropped') AS dropped,
               round(avg(grounding) FILTER (WHERE decision IN ('stored', 'rejected_grounding'))::numeric, 4)
                 AS avg_gs_checked,
               round(min(grounding) FILTER (WHERE decision IN ('stored', 'rejected_grounding'))::numeric, 4)
                 AS min_gs_checked,
               round(avg(novelty) FILTER (WHERE novelty IS NOT NULL)::numeric, 4) AS avg_novelty
        FROM writeback_log GROUP BY tenant_id, corpus_id;

        CREATE VIEW experience_reuse_coverage WITH (security_invoker = true) AS
        SELECT tenant_id, corpus_id,
               count(*) AS stored_experiences,
               coalesce(sum(fusion_uses), 0) AS topk_selections,
               round(100.0 * count(*) FILTER (WHERE fusion_uses > 0) / nullif(count(*), 0), 2) AS fusion_coverage_pct,
               coalesce(max(fusion_uses), 0) AS max_fusion_uses,
               coalesce(sum(scaffold_uses), 0) AS scaffold_uses,
               round(100.0 * count(*) FILTER (WHERE scaffold_uses > 0) / nullif(count(*), 0), 2)
                 AS scaffold_coverage_pct,
               coalesce(max(scaffold_uses), 0) AS max_scaffold_uses
        FROM experiences GROUP BY tenant_id, corpus_id;

        CREATE VIEW experience_health WITH (security_invoker = true) AS
        SELECT tenant_id, corpus_id,
               count(*) AS experiences,
               count(*) FILTER (WHERE NOT stale AND (expires_at IS NULL OR expires_at > now())) AS active,
               count(*) FILTER (WHERE stale) AS stale,
               count(*) FILTER (WHERE expires_at <= now()) AS expired,
               round(avg(confidence)::numeric, 4) AS avg_confidence,
               min(created_at) AS oldest,
               max(created_at) AS newest,
               max(last_used_at) AS last_used
        FROM experiences GROUP BY tenant_id, corpus_id;
        """
    )
    for view in VIEWS:
        op.execute(f"GRANT SELECT ON {view} TO {role}")


def downgrade() -> None:
    for view in reversed(VIEWS):
        op.execute(f"DROP VIEW IF EXISTS {view}")
    op.execute("DROP FUNCTION IF EXISTS livingrag_ensure_experience_hnsw(integer)")
    op.execute("DROP INDEX IF EXISTS ix_writeback_log_experience")
    op.execute("DROP INDEX IF EXISTS ix_experiences_query_embedding_hnsw_384")
    op.execute(
        "CREATE INDEX ix_experiences_query_embedding_hnsw_384 ON experiences"
        " USING hnsw ((query_embedding::vector(384)) vector_cosine_ops) WHERE embedding_dim = 384"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_experience_entities_lookup ON experience_entities (tenant_id, corpus_id, entity_id)"
    )
    op.execute("DROP INDEX IF EXISTS ix_experience_entities_channel")
    op.execute("ALTER TABLE experiences DROP COLUMN IF EXISTS query_template")
    op.execute("ALTER TABLE experiences RESET (toast_tuple_target)")
    op.execute("ALTER TABLE experiences ALTER COLUMN query_embedding SET STORAGE EXTERNAL")
