"""Memory people can trust and correct: provenance and trust on experiences, feedback on answers,
an append-only history of each experience, the answers people marked wrong, and the write-back
candidate kept with its decision.

* ``experiences`` gains who vouches for it: ``origin`` (``gate``: the automatic gate, with its
  verifier in ``origin_detail``; ``judge``: an LLM judge, with its model; ``person``: a person's
  correction; ``ungated``: the "w/o quality gate" ablation), ``trust`` (``unverified``,
  ``verified``, ``retracted``) with ``trust_actor``, ``trust_at`` and ``trust_reason``, ``gated``
  (stored through the gates; was ``grounding->>'gated'``) and ``answer_uses`` (answers given again
  from it without an LLM call) and ``question_key`` (the question with case, punctuation and spacing
  removed: what answer reuse and feedback compare, indexed per corpus). Existing rows become ``unverified``. A retracted experience is
  inactive: matching, novelty and answer reuse skip it like a stale one.
* ``experience_events``: one row per thing that happened to an experience (created, used for
  fusion / scaffold / finding / answer, verified, retracted, corrected, stale, expired, deleted),
  with its actor (``key <id>``, ``operator``, ``admin`` or ``system``), time and reason. The
  application role may read and append, never change or delete (append-only); ``experience_id``
  has no foreign key, so a deleted experience's history stays.
* ``answer_feedback``: each verdict (``right`` / ``wrong``) a person gave on an answered question
  (``query_log_id``), with an optional corrected answer, a note, the actor and what it did.
* ``rejected_answers``: the (question key, answer key) pairs people marked wrong, per corpus: that
  answer is never served again for that question and the gate refuses it.
* ``writeback_log.candidate``: what a candidate the gates rejected needs to be stored later (its
  query embedding, activation maps, explanation, cited passages with their content hashes), so that
  a person's ``right`` can store it; ``ix_writeback_log_query`` finds a question's decision.
* The analytics views: ``experience_health`` counts retracted experiences as inactive and counts
  trust; ``experience_history`` lists events with the experience's question and answer;
  ``experience_trust`` counts experiences by origin and trust.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import context, op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CURRENT_TENANT = "NULLIF(current_setting('livingrag.tenant_id', true), '')::bigint"
MAINTENANCE = "current_setting('livingrag.maintenance', true) = 'on'"
IN_CORPUS = "FOREIGN KEY (corpus_id, tenant_id) REFERENCES corpora (id, tenant_id) ON DELETE CASCADE"
NEW_TABLES = ("experience_events", "answer_feedback", "rejected_answers")
EVENTS = (
    "created",
    "used_fusion",
    "used_scaffold",
    "used_finding",
    "used_answer",
    "verified",
    "retracted",
    "corrected",
    "unretracted",
    "stale",
    "expired",
    "deleted",
)


def _app_role() -> str:
    role = context.config.attributes.get("app_role", "livingrag_app") if context.config else "livingrag_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"invalid application role name {role!r}")
    return role


def _owner(table: str) -> str:
    owner = (
        op.get_bind()
        .exec_driver_sql(f"SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = '{table}'::regclass")
        .scalar_one()
    )
    return '"' + owner.replace('"', '""') + '"'


HEALTH_OLD = """
        CREATE OR REPLACE VIEW experience_health WITH (security_invoker = true) AS
        SELECT tenant_id, corpus_id,
               count(*) AS experiences,
               count(*) FILTER (WHERE NOT stale AND (expires_at IS NULL OR expires_at > now())) AS active,
               count(*) FILTER (WHERE stale) AS stale,
               count(*) FILTER (WHERE expires_at <= now()) AS expired,
               round(avg(confidence)::numeric, 4) AS avg_confidence,
               min(created_at) AS oldest,
               max(created_at) AS newest,
               max(last_used_at) AS last_used
        FROM experiences GROUP BY tenant_id, corpus_id
"""

HEALTH_NEW = """
        CREATE OR REPLACE VIEW experience_health WITH (security_invoker = true) AS
        SELECT tenant_id, corpus_id,
               count(*) AS experiences,
               count(*) FILTER (WHERE NOT stale AND trust <> 'retracted'
                                AND (expires_at IS NULL OR expires_at > now())) AS active,
               count(*) FILTER (WHERE stale) AS stale,
               count(*) FILTER (WHERE expires_at <= now()) AS expired,
               round(avg(confidence)::numeric, 4) AS avg_confidence,
               min(created_at) AS oldest,
               max(created_at) AS newest,
               max(last_used_at) AS last_used,
               count(*) FILTER (WHERE trust = 'verified') AS verified,
               count(*) FILTER (WHERE trust = 'unverified') AS unverified,
               count(*) FILTER (WHERE trust = 'retracted') AS retracted,
               coalesce(sum(answer_uses), 0) AS answer_uses
        FROM experiences GROUP BY tenant_id, corpus_id
"""


def _question_key(question: str) -> str:
    """``livingrag.experience.answer_reuse.question_key`` as of this revision (case, punctuation and
    spacing removed), frozen here so that the migration means the same whatever the code becomes."""
    kept = "".join(ch for ch in question.casefold() if ch.isalnum() or ch.isspace())
    return " ".join(kept.split())


def _backfill_question_keys(batch: int = 5000) -> None:
    """Set ``question_key`` of every existing experience, ``batch`` rows per statement."""
    bind = op.get_bind()
    last = (0, 0)
    while True:
        rows = bind.exec_driver_sql(
            "SELECT tenant_id, id, query FROM experiences WHERE (tenant_id, id) > (%(t)s, %(i)s)"
            " ORDER BY tenant_id, id LIMIT %(n)s",
            {"t": last[0], "i": last[1], "n": batch},
        ).all()
        if not rows:
            return
        bind.exec_driver_sql(
            "UPDATE experiences x SET question_key = k.key FROM unnest(%(t)s::bigint[], %(i)s::bigint[], %(k)s::text[])"
            " AS k(tenant_id, id, key) WHERE x.tenant_id = k.tenant_id AND x.id = k.id",
            {
                "t": [int(r[0]) for r in rows],
                "i": [int(r[1]) for r in rows],
                "k": [_question_key(r[2]) for r in rows],
            },
        )
        last = (int(rows[-1][0]), int(rows[-1][1]))


def upgrade() -> None:
    role = _app_role()
    events = ", ".join(f"'{e}'" for e in EVENTS)
    op.execute(
        """
        ALTER TABLE experiences
          ADD COLUMN origin text NOT NULL DEFAULT 'gate'
            CONSTRAINT ck_experiences_origin CHECK (origin IN ('gate', 'judge', 'person', 'ungated')),
          ADD COLUMN origin_detail text,
          ADD COLUMN trust text NOT NULL DEFAULT 'unverified'
            CONSTRAINT ck_experiences_trust CHECK (trust IN ('unverified', 'verified', 'retracted')),
          ADD COLUMN trust_actor text,
          ADD COLUMN trust_at timestamptz,
          ADD COLUMN trust_reason text,
          ADD COLUMN gated boolean NOT NULL DEFAULT true,
          ADD COLUMN answer_uses integer NOT NULL DEFAULT 0,
          ADD COLUMN question_key text
        """
    )
    _backfill_question_keys()
    op.execute("CREATE INDEX ix_experiences_question ON experiences (tenant_id, corpus_id, question_key)")
    # what the rows said of themselves until now: the verifier and whether the gates ran
    op.execute(
        """
        UPDATE experiences SET
          gated = coalesce((grounding ->> 'gated') = 'true', false),
          origin = CASE WHEN coalesce((grounding ->> 'gated') = 'true', false) = false THEN 'ungated'
                        WHEN grounding ->> 'verifier' = 'judge' THEN 'judge' ELSE 'gate' END,
          origin_detail = grounding ->> 'verifier'
        """
    )
    op.execute("ALTER TABLE writeback_log ADD COLUMN candidate jsonb")
    op.execute(
        "CREATE INDEX ix_writeback_log_query ON writeback_log (tenant_id, query_log_id) WHERE query_log_id IS NOT NULL"
    )
    op.execute(
        f"""
        CREATE TABLE experience_events (
          id bigint GENERATED BY DEFAULT AS IDENTITY,
          tenant_id bigint NOT NULL,
          corpus_id bigint NOT NULL,
          experience_id bigint NOT NULL,
          event text NOT NULL CONSTRAINT ck_experience_events_event CHECK (event IN ({events})),
          actor text NOT NULL,
          key_id bigint,
          query_log_id bigint,
          reason text,
          details jsonb NOT NULL DEFAULT '{{}}',
          created_at timestamptz NOT NULL DEFAULT now(),
          CONSTRAINT experience_events_pkey PRIMARY KEY (tenant_id, id),
          CONSTRAINT fk_experience_events_corpus_id_corpora {IN_CORPUS}
        );
        CREATE INDEX ix_experience_events_experience ON experience_events (tenant_id, experience_id, created_at);
        CREATE INDEX ix_experience_events_scope_created ON experience_events (tenant_id, corpus_id, created_at);

        CREATE TABLE answer_feedback (
          id bigint GENERATED BY DEFAULT AS IDENTITY,
          tenant_id bigint NOT NULL,
          corpus_id bigint NOT NULL,
          query_log_id bigint NOT NULL,
          verdict text NOT NULL CONSTRAINT ck_answer_feedback_verdict CHECK (verdict IN ('right', 'wrong')),
          answer text,
          note text,
          actor text NOT NULL,
          key_id bigint,
          experience_id bigint,
          outcome jsonb NOT NULL DEFAULT '{{}}',
          created_at timestamptz NOT NULL DEFAULT now(),
          CONSTRAINT answer_feedback_pkey PRIMARY KEY (tenant_id, id),
          CONSTRAINT fk_answer_feedback_corpus_id_corpora {IN_CORPUS}
        );
        CREATE INDEX ix_answer_feedback_query ON answer_feedback (tenant_id, query_log_id, created_at);

        CREATE TABLE rejected_answers (
          tenant_id bigint NOT NULL,
          corpus_id bigint NOT NULL,
          question_key text NOT NULL,
          answer_key text NOT NULL,
          answer text NOT NULL,
          query_log_id bigint,
          actor text NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now(),
          CONSTRAINT rejected_answers_pkey PRIMARY KEY (tenant_id, corpus_id, question_key, answer_key),
          CONSTRAINT fk_rejected_answers_corpus_id_corpora {IN_CORPUS}
        );
        """
    )
    for table in NEW_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
        )
        op.execute(
            f"CREATE POLICY owner_maintenance ON {table} AS PERMISSIVE FOR ALL TO {_owner(table)} "
            f"USING ({MAINTENANCE}) WITH CHECK ({MAINTENANCE})"
        )
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    # the history is append-only for the application; feedback and wrong pairs are its own to manage
    op.execute(f"GRANT SELECT, INSERT ON experience_events TO {role}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON answer_feedback TO {role}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON rejected_answers TO {role}")
    op.execute(f"GRANT USAGE, SELECT ON SEQUENCE experience_events_id_seq TO {role}")
    op.execute(f"GRANT USAGE, SELECT ON SEQUENCE answer_feedback_id_seq TO {role}")

    op.execute(HEALTH_NEW)
    op.execute(
        """
        CREATE VIEW experience_history WITH (security_invoker = true) AS
        SELECT ev.tenant_id, ev.corpus_id, ev.experience_id, ev.id AS event_id, ev.created_at, ev.event,
               ev.actor, ev.key_id, ev.query_log_id, ev.reason, ev.details,
               x.query, x.answer, x.trust, x.origin
        FROM experience_events ev
        LEFT JOIN experiences x ON x.tenant_id = ev.tenant_id AND x.id = ev.experience_id;

        CREATE VIEW experience_trust WITH (security_invoker = true) AS
        SELECT tenant_id, corpus_id, origin, trust,
               count(*) AS experiences,
               count(*) FILTER (WHERE NOT stale AND trust <> 'retracted'
                                AND (expires_at IS NULL OR expires_at > now())) AS active,
               coalesce(sum(answer_uses), 0) AS answer_uses,
               coalesce(sum(fusion_uses), 0) AS fusion_uses,
               coalesce(sum(scaffold_uses), 0) AS scaffold_uses
        FROM experiences GROUP BY tenant_id, corpus_id, origin, trust;
        """
    )
    op.execute(f"GRANT SELECT ON experience_history TO {role}")
    op.execute(f"GRANT SELECT ON experience_trust TO {role}")


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS experience_trust")
    op.execute("DROP VIEW IF EXISTS experience_history")
    op.execute("DROP VIEW IF EXISTS experience_health")
    op.execute(HEALTH_OLD)
    op.execute(f"GRANT SELECT ON experience_health TO {_app_role()}")
    for table in reversed(NEW_TABLES):
        op.execute(f"DROP TABLE IF EXISTS {table}")
    op.execute("DROP INDEX IF EXISTS ix_writeback_log_query")
    op.execute("DROP INDEX IF EXISTS ix_experiences_question")
    op.execute("ALTER TABLE writeback_log DROP COLUMN IF EXISTS candidate")
    op.execute(
        "ALTER TABLE experiences DROP COLUMN IF EXISTS question_key, DROP COLUMN IF EXISTS answer_uses, DROP COLUMN IF EXISTS gated,"
        " DROP COLUMN IF EXISTS trust_reason, DROP COLUMN IF EXISTS trust_at, DROP COLUMN IF EXISTS trust_actor,"
        " DROP COLUMN IF EXISTS trust, DROP COLUMN IF EXISTS origin_detail, DROP COLUMN IF EXISTS origin"
    )
