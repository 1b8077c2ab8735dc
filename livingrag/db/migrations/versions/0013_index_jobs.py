"""Index jobs in the database (issue 42, item 7).

Until now an index job (``POST /v1/corpora/{id}/index-jobs``) lived in the memory of the worker that
took it: under ``serve --workers 2`` the other worker answered 404 for it, and a restart forgot it
(a queued job was lost, its documents with it). ``index_jobs`` holds each job: its documents until
it ends (``payload``), its ``state`` (``queued``, ``running``, ``succeeded``, ``failed``), progress
per indexing stage, result or error, and, while it runs, the worker running it (``worker``, and
``worker_lock``: the session-level advisory lock that worker's database session holds while the
process lives) with a ``heartbeat_at`` the worker stamps every few seconds with the progress. Any
worker answers for any job; a queued job is taken by whichever worker is free (oldest first, the
tenants in turn); a running job whose worker is gone (its lock is free, or its heartbeat is older
than the staleness bound) is queued again by the next worker that looks, or failed with the reason
once it has been tried twice.

The table is tenant-owned like the others: ``tenant_id`` first in the primary key, the corpus
reached through ``(corpus_id, tenant_id)`` (deleting a corpus deletes its jobs), row-level security
enabled and forced with the ``tenant_isolation`` and ``owner_maintenance`` policies; the application
role reads and writes its tenant's jobs. What a worker must do across tenants goes through three
narrow doors, ``SECURITY DEFINER`` functions owned by the owner that set ``livingrag.maintenance``
for their own duration (the API never takes the owner route): ``livingrag_index_job_claim(worker,
worker_lock)`` marks the next queued job running for the worker and returns only its tenant and id
(the worker reads the job in that tenant's session), ``livingrag_index_job_recover(stale_after_s,
max_attempts, failed_reason)`` puts back the orphans and returns which (the staleness bound is at
least 10 s, the attempts 1 to 10, whatever the caller asks), and ``livingrag_index_jobs_active()``
counts the queued and running jobs of all tenants (the global cap).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import context, op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CURRENT_TENANT = "NULLIF(current_setting('livingrag.tenant_id', true), '')::bigint"
MAINTENANCE = "current_setting('livingrag.maintenance', true) = 'on'"
IN_CORPUS = "FOREIGN KEY (corpus_id, tenant_id) REFERENCES corpora (id, tenant_id) ON DELETE CASCADE"
TABLE = "index_jobs"


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


def _schema() -> str:
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    return '"' + schema.replace('"', '""') + '"'


# A worker's lock: (0x4C524A42, worker_lock) taken with pg_advisory_lock(int, int) by some session.
LOCK_HELD = """EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND l.classid = 1280461378::oid AND l.objid = j.worker_lock::oid AND l.objsubid = 2)"""


def _doors(role: str) -> None:
    # plpgsql that sets livingrag.maintenance itself and puts the prior value back (a non-superuser
    # may not attach a custom setting to a function), as livingrag_api_key_grant does (0006)
    head = f"""LANGUAGE plpgsql VOLATILE SECURITY DEFINER
          SET search_path = {_schema()}, pg_temp
          AS $$
          #variable_conflict use_column
          DECLARE prior text := current_setting('livingrag.maintenance', true);"""
    op.execute(
        f"""
        CREATE FUNCTION livingrag_index_job_claim(p_worker text, p_worker_lock bigint)
          RETURNS TABLE (tenant_id bigint, id text)
          {head}
          BEGIN
            PERFORM set_config('livingrag.maintenance', 'on', true);
            RETURN QUERY
              WITH next AS (
                SELECT j.tenant_id, j.id FROM {TABLE} j WHERE j.state = 'queued'
                ORDER BY (SELECT max(r.started_at) FROM {TABLE} r WHERE r.tenant_id = j.tenant_id) ASC NULLS FIRST,
                         j.created_at, j.id
                LIMIT 1 FOR UPDATE OF j SKIP LOCKED)
              UPDATE {TABLE} x SET state = 'running', worker = p_worker, worker_lock = p_worker_lock,
                attempts = x.attempts + 1, started_at = clock_timestamp(), heartbeat_at = clock_timestamp(),
                finished_at = NULL, error = NULL, progress = '{{}}'
              FROM next WHERE x.tenant_id = next.tenant_id AND x.id = next.id
              RETURNING x.tenant_id, x.id;
            PERFORM set_config('livingrag.maintenance', coalesce(prior, ''), true);
          END $$;
        REVOKE ALL ON FUNCTION livingrag_index_job_claim(text, bigint) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION livingrag_index_job_claim(text, bigint) TO {role};

        CREATE FUNCTION livingrag_index_job_recover(
            p_stale_after_s double precision, p_max_attempts integer, p_failed_reason text)
          RETURNS TABLE (tenant_id bigint, id text, worker text, state text, why text)
          {head}
            stale double precision := greatest(coalesce(p_stale_after_s, 120), 10);
            tries integer := least(greatest(coalesce(p_max_attempts, 2), 1), 10);
          BEGIN
            PERFORM set_config('livingrag.maintenance', 'on', true);
            RETURN QUERY
              WITH lost AS (
                SELECT j.tenant_id, j.id, j.worker, j.attempts,
                  CASE WHEN NOT {LOCK_HELD}
                       THEN 'its process is gone (its database session ended)'
                       ELSE format('it reported nothing for over %s s', stale) END AS why
                FROM {TABLE} j
                WHERE j.state = 'running' AND (NOT {LOCK_HELD}
                  OR j.heartbeat_at IS NULL OR j.heartbeat_at < clock_timestamp() - make_interval(secs => stale))
                FOR UPDATE OF j SKIP LOCKED)
              UPDATE {TABLE} x SET
                state = CASE WHEN lost.attempts < tries THEN 'queued' ELSE 'failed' END,
                worker = CASE WHEN lost.attempts < tries THEN NULL ELSE x.worker END,
                worker_lock = NULL,
                started_at = CASE WHEN lost.attempts < tries THEN NULL ELSE x.started_at END,
                heartbeat_at = CASE WHEN lost.attempts < tries THEN NULL ELSE x.heartbeat_at END,
                progress = CASE WHEN lost.attempts < tries THEN '{{}}'::jsonb ELSE x.progress END,
                error = CASE WHEN lost.attempts < tries THEN NULL
                             ELSE replace(coalesce(p_failed_reason, 'interrupted ({{why}})'), '{{why}}', lost.why) END,
                finished_at = CASE WHEN lost.attempts < tries THEN NULL ELSE clock_timestamp() END,
                payload = CASE WHEN lost.attempts < tries THEN x.payload ELSE NULL END
              FROM lost WHERE x.tenant_id = lost.tenant_id AND x.id = lost.id
              RETURNING x.tenant_id, x.id, lost.worker, x.state, lost.why;
            PERFORM set_config('livingrag.maintenance', coalesce(prior, ''), true);
          END $$;
        REVOKE ALL ON FUNCTION livingrag_index_job_recover(double precision, integer, text) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION livingrag_index_job_recover(double precision, integer, text) TO {role};

        CREATE FUNCTION livingrag_index_jobs_active() RETURNS bigint
          {head}
            n bigint;
          BEGIN
            PERFORM set_config('livingrag.maintenance', 'on', true);
            SELECT count(*) INTO n FROM {TABLE} WHERE state IN ('queued', 'running');
            PERFORM set_config('livingrag.maintenance', coalesce(prior, ''), true);
            RETURN n;
          END $$;
        REVOKE ALL ON FUNCTION livingrag_index_jobs_active() FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION livingrag_index_jobs_active() TO {role};
        """
    )


def upgrade() -> None:
    role = _app_role()
    op.execute(
        f"""
        CREATE TABLE {TABLE} (
          tenant_id bigint NOT NULL,
          id text NOT NULL,
          corpus_id bigint NOT NULL,
          state text NOT NULL DEFAULT 'queued'
            CONSTRAINT ck_index_jobs_state CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
          documents integer NOT NULL,
          payload jsonb,
          progress jsonb NOT NULL DEFAULT '{{}}',
          result jsonb,
          error text,
          worker text,
          worker_lock bigint,
          attempts integer NOT NULL DEFAULT 0,
          created_at timestamptz NOT NULL DEFAULT now(),
          started_at timestamptz,
          heartbeat_at timestamptz,
          finished_at timestamptz,
          CONSTRAINT index_jobs_pkey PRIMARY KEY (tenant_id, id),
          CONSTRAINT fk_index_jobs_corpus_id_corpora {IN_CORPUS}
        );
        CREATE INDEX ix_index_jobs_state_created ON {TABLE} (state, created_at);
        CREATE INDEX ix_index_jobs_tenant_created ON {TABLE} (tenant_id, created_at);
        """
    )
    op.execute(f"ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON {TABLE} "
        f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    op.execute(
        f"CREATE POLICY owner_maintenance ON {TABLE} AS PERMISSIVE FOR ALL TO {_owner(TABLE)} "
        f"USING ({MAINTENANCE}) WITH CHECK ({MAINTENANCE})"
    )
    op.execute(f"ALTER TABLE {TABLE} FORCE ROW LEVEL SECURITY")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {TABLE} TO {role}")
    _doors(role)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS livingrag_index_jobs_active()")
    op.execute("DROP FUNCTION IF EXISTS livingrag_index_job_recover(double precision, integer, text)")
    op.execute("DROP FUNCTION IF EXISTS livingrag_index_job_claim(text, bigint)")
    op.execute(f"DROP TABLE IF EXISTS {TABLE}")
