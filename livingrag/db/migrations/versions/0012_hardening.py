"""Hardening: staleness in the database, and key changes only through narrow doors (issue 42).

* **The `feedback` scope** (issue 41) joins `ck_api_keys_scopes`; a downgrade takes it off the keys
  that have it (a key with no other scope is revoked).
* **Staleness on every path.** Until now only the application's passage-change hook
  (``livingrag.corpus.hooks``) marked the experiences citing an updated or deleted passage stale;
  an ``UPDATE passages SET text = ...`` or ``DELETE FROM passages`` in SQL left them active. Two
  statement-level triggers on ``passages`` (``AFTER UPDATE`` and ``AFTER DELETE``, with transition
  tables) now do it for every writer: per (tenant, corpus), the active experiences whose
  ``source_passage_ids`` name a passage whose title or text changed (or whose row went) become
  ``stale`` with the application's reason (``source passage updated: 3, 5``, at most ten ids and
  ``and N more``, which ``insights.stale_passage_ids`` parses), each with a ``stale`` event by
  ``system``, in the statement's transaction. Only ``NOT stale`` rows are touched, so the
  application's own marking afterwards finds nothing left: each experience is marked and evented
  once. An update that leaves title and text as they were (an embedding, counts) marks nothing.

  The application's locking rule holds on the SQL path too: a change that does not already hold
  the corpus's evidence lock (``graph_writer.lock_evidence``; the application takes it before it
  changes passages) takes it here, waiting for the write-backs that hold it shared, and moves the
  corpus's version (``version`` and ``rewrite_version``, as ``corpora.bump_version`` does), so a
  write-back either committed before the change (and is marked by it) or finds the version moved
  and checks its evidence afresh; a loaded graph is read again. The application's transactions,
  which hold the lock, get no second version bump. That holds at ``READ COMMITTED`` (each
  statement of the trigger sees what committed before it); a ``REPEATABLE READ`` transaction that
  changes passages in SQL does not see a write-back that committed while it waited. An SQL change
  takes the lock after it has locked its rows, so one that meets the application changing the
  same passages at the same moment can deadlock with it; PostgreSQL then cancels one of the two.

  The trigger function runs as the role that changed the passages (``SECURITY INVOKER``): the
  application role's RLS confines it to its tenant, the owner reaches other tenants only on the
  owner route, and what it marks is filtered by the changed passages' tenant and corpus. Passages
  deleted with their corpus (or tenant) have no corpus left: nothing is marked or evented there.
  ``TRUNCATE`` is not covered (only the owner may, and it takes the other tables with it).

* **Keys.** The application role could ``UPDATE api_keys SET revoked_at = NULL`` (un-revoke a key
  of its tenant) and ``INSERT`` a key row with any scopes. It now holds no ``INSERT`` on
  ``api_keys`` (nor its sequence) and creates keys only through ``livingrag_api_key_create``
  (``SECURITY DEFINER``, owned by the owner), which refuses another tenant than the session's
  ``livingrag.tenant_id``, a name, hash or prefix of the wrong shape, no, NULL or repeated scopes
  (which scopes exist is the check constraint ``ck_api_keys_scopes``'s to say) and an expiry in
  the past or more than ten years away. It keeps ``UPDATE (revoked_at)``, for revoking, and the
  trigger ``api_keys_revoked_once`` holds ``revoked_at`` for every role: it goes from NULL to the
  transaction's time (whatever value was written) and never changes again, so a revoked key stays
  revoked. ``last_used_at`` is stamped by ``livingrag_api_key_grant`` as before.

Downgrade drops the triggers and functions and gives the application role its 0005 privileges
back (insert, the sequence).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import context, op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EVIDENCE_LOCK_BASE = 0x4C52_4500_0000_0000
"""``livingrag.db.repositories.graph_writer._EVIDENCE_LOCK_BASE`` (the corpus id is added), frozen here."""
APP_INSERTABLE = "tenant_id, name, key_hash, prefix, scopes, expires_at"
CREATE_ARGS = "bigint, text, text, text, text[], timestamptz"

# The passages whose title or text changed, or that left their corpus, per statement. The UPDATE
# trigger cannot name columns (transition tables exclude column lists), so it compares the rows.
UPDATED = """
    SELECT o.tenant_id, o.corpus_id, array_agg(DISTINCT o.id ORDER BY o.id) AS ids
    FROM old_rows o LEFT JOIN new_rows n ON n.tenant_id = o.tenant_id AND n.id = o.id
    WHERE n.id IS NULL OR n.corpus_id <> o.corpus_id
       OR n.title IS DISTINCT FROM o.title OR n.text IS DISTINCT FROM o.text
    GROUP BY o.tenant_id, o.corpus_id ORDER BY o.tenant_id, o.corpus_id
"""
DELETED = """
    SELECT o.tenant_id, o.corpus_id, array_agg(DISTINCT o.id ORDER BY o.id) AS ids
    FROM old_rows o GROUP BY o.tenant_id, o.corpus_id ORDER BY o.tenant_id, o.corpus_id
"""


def _app_role() -> str:
    role = context.config.attributes.get("app_role", "livingrag_app") if context.config else "livingrag_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"invalid application role name {role!r}")
    return role


def _schema() -> str:
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    return '"' + schema.replace('"', '""') + '"'


def _stale_trigger() -> None:
    updated = UPDATED.replace("'", "''")
    deleted = DELETED.replace("'", "''")
    op.execute(
        f"""
        CREATE FUNCTION livingrag_passages_changed() RETURNS trigger
          LANGUAGE plpgsql VOLATILE SECURITY INVOKER
          SET search_path = {_schema()}, pg_temp
          AS $$
          DECLARE
            kind text := CASE TG_OP WHEN 'DELETE' THEN 'deleted' ELSE 'updated' END;
            c record;
            lock_key bigint;
            why text;
          BEGIN
            FOR c IN EXECUTE CASE TG_OP WHEN 'DELETE' THEN '{deleted}' ELSE '{updated}' END LOOP
              -- passages deleted with their corpus (or tenant): its experiences go too
              CONTINUE WHEN NOT EXISTS (
                SELECT 1 FROM corpora k WHERE k.tenant_id = c.tenant_id AND k.id = c.corpus_id);
              -- the evidence lock, unless this transaction holds it (the application's changes,
              -- which move the version themselves); then the version moves, as any graph change's
              lock_key := {EVIDENCE_LOCK_BASE} + c.corpus_id;
              IF NOT EXISTS (
                SELECT 1 FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted
                  AND l.mode = 'ExclusiveLock' AND l.objsubid = 1
                  AND l.classid = (lock_key >> 32)::oid AND l.objid = (lock_key & 4294967295)::oid
              ) THEN
                PERFORM pg_advisory_xact_lock(lock_key);
                UPDATE corpora k SET version = k.version + 1, rewrite_version = k.version + 1, updated_at = now()
                WHERE k.tenant_id = c.tenant_id AND k.id = c.corpus_id;
              END IF;
              why := format('source passage %s: %s%s', kind, array_to_string(c.ids[1:10], ', '),
                            CASE WHEN cardinality(c.ids) > 10
                                 THEN format(' and %s more', cardinality(c.ids) - 10) ELSE '' END);
              WITH touched AS (
                UPDATE experiences x SET stale = true, stale_reason = why
                WHERE x.tenant_id = c.tenant_id AND x.corpus_id = c.corpus_id AND NOT x.stale
                  AND x.source_passage_ids && c.ids
                RETURNING x.tenant_id, x.corpus_id, x.id
              )
              INSERT INTO experience_events (tenant_id, corpus_id, experience_id, event, actor, reason)
              SELECT t.tenant_id, t.corpus_id, t.id, 'stale', 'system', why FROM touched t;
            END LOOP;
            RETURN NULL;
          END $$;
        REVOKE ALL ON FUNCTION livingrag_passages_changed() FROM PUBLIC;
        CREATE TRIGGER passages_mark_stale_on_update AFTER UPDATE ON passages
          REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
          FOR EACH STATEMENT EXECUTE FUNCTION livingrag_passages_changed();
        CREATE TRIGGER passages_mark_stale_on_delete AFTER DELETE ON passages
          REFERENCING OLD TABLE AS old_rows
          FOR EACH STATEMENT EXECUTE FUNCTION livingrag_passages_changed();
        """
    )


def _key_doors(role: str) -> None:
    op.execute(
        f"""
        CREATE FUNCTION livingrag_api_key_revoked_once() RETURNS trigger
          LANGUAGE plpgsql VOLATILE SECURITY INVOKER
          SET search_path = {_schema()}, pg_temp
          AS $$
          BEGIN
            IF OLD.revoked_at IS NOT NULL THEN
              IF NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
                RAISE EXCEPTION 'api key % was revoked at %: a revoked key stays revoked (create a new key)',
                  OLD.id, OLD.revoked_at USING ERRCODE = 'insufficient_privilege';
              END IF;
            ELSIF NEW.revoked_at IS NOT NULL THEN
              NEW.revoked_at := now();  -- revoking stamps the time it happened, whatever was written
            END IF;
            RETURN NEW;
          END $$;
        REVOKE ALL ON FUNCTION livingrag_api_key_revoked_once() FROM PUBLIC;
        CREATE TRIGGER api_keys_revoked_once BEFORE UPDATE OF revoked_at ON api_keys
          FOR EACH ROW EXECUTE FUNCTION livingrag_api_key_revoked_once();

        CREATE FUNCTION livingrag_api_key_create(
            p_tenant_id bigint, p_name text, p_key_hash text, p_prefix text, p_scopes text[], p_expires_at timestamptz)
          RETURNS TABLE (id bigint, tenant_id bigint, name text, prefix text, scopes text[], created_at timestamptz,
                         last_used_at timestamptz, expires_at timestamptz, revoked_at timestamptz)
          LANGUAGE plpgsql VOLATILE SECURITY DEFINER
          SET search_path = {_schema()}, pg_temp
          AS $$
          #variable_conflict use_column
          DECLARE
            session_tenant bigint := NULLIF(current_setting('livingrag.tenant_id', true), '')::bigint;
          BEGIN
            IF session_tenant IS NULL OR p_tenant_id IS DISTINCT FROM session_tenant THEN
              RAISE EXCEPTION 'key creation refused by row-level security: this session creates keys for its own '
                'tenant only (livingrag.tenant_id = %), not for tenant %', coalesce(session_tenant::text, 'unset'),
                coalesce(p_tenant_id::text, 'NULL') USING ERRCODE = 'insufficient_privilege';
            END IF;
            IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{{0,63}}$' OR p_name ~ '^[0-9]+$' THEN
              RAISE EXCEPTION 'key name % is not valid: 1 to 64 letters, digits, ".", "_" or "-", starting with a '
                'letter or digit and not only digits', p_name USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF p_key_hash IS NULL OR p_key_hash !~ '^[0-9a-f]{{64}}$' THEN
              RAISE EXCEPTION 'key hash must be the key''s sha256 in lower-case hex'
                USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF p_prefix IS NULL OR p_prefix !~ '^lrg_[A-Za-z0-9_-]{{6}}$' THEN
              RAISE EXCEPTION 'key prefix % is not the first 10 characters of a key', p_prefix
                USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF p_scopes IS NULL OR cardinality(p_scopes) = 0 OR array_position(p_scopes, NULL) IS NOT NULL
               OR (SELECT count(DISTINCT s) FROM unnest(p_scopes) s) <> cardinality(p_scopes) THEN
              RAISE EXCEPTION 'key scopes % are not valid: give one or more scopes, each once', p_scopes
                USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF p_expires_at IS NOT NULL AND (p_expires_at <= now() OR p_expires_at > now() + interval '3651 days') THEN
              RAISE EXCEPTION 'key expiry % is not valid: in the future and at most 10 years away', p_expires_at
                USING ERRCODE = 'invalid_parameter_value';
            END IF;
            -- which scopes exist is ck_api_keys_scopes's to say
            RETURN QUERY
              INSERT INTO api_keys AS k (tenant_id, name, key_hash, prefix, scopes, expires_at)
              VALUES (p_tenant_id, p_name, p_key_hash, p_prefix, p_scopes, p_expires_at)
              RETURNING k.id, k.tenant_id, k.name, k.prefix, k.scopes, k.created_at, k.last_used_at, k.expires_at,
                        k.revoked_at;
          END $$;
        REVOKE ALL ON FUNCTION livingrag_api_key_create({CREATE_ARGS}) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION livingrag_api_key_create({CREATE_ARGS}) TO {role};
        """
    )
    op.execute(f"REVOKE INSERT ({APP_INSERTABLE}) ON api_keys FROM {role}")
    op.execute(f"REVOKE INSERT ON api_keys FROM {role}")
    op.execute(f"REVOKE USAGE, SELECT, UPDATE ON SEQUENCE api_keys_id_seq FROM {role}")


SCOPES_BEFORE = ("read", "write", "admin")
SCOPES_NOW = ("read", "write", "feedback", "admin")
"""``feedback`` (issue 41): verdicts on answers, verifying and retracting experiences."""


def _scope_check(scopes: tuple[str, ...]) -> None:
    allowed = ", ".join(f"'{s}'" for s in scopes)
    op.execute("ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS ck_api_keys_scopes")
    op.execute(
        "ALTER TABLE api_keys ADD CONSTRAINT ck_api_keys_scopes"
        f" CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY[{allowed}]::text[])"
    )


def upgrade() -> None:
    _stale_trigger()
    _key_doors(_app_role())
    _scope_check(SCOPES_NOW)
    # keys that held every scope (each tenant's default key) keep holding every scope; this gives
    # them nothing they could not do (write allows the feedback routes)
    op.execute(
        "UPDATE api_keys SET scopes = ARRAY['read', 'write', 'feedback', 'admin']::text[]"
        " WHERE scopes @> ARRAY['read', 'write', 'admin']::text[] AND NOT 'feedback' = ANY(scopes)"
    )


def downgrade() -> None:
    role = _app_role()
    # keys given the feedback scope lose it (one with no other scope is revoked: it could do nothing)
    op.execute("UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE scopes = ARRAY['feedback']::text[]")
    op.execute(
        "UPDATE api_keys SET scopes = CASE WHEN scopes = ARRAY['feedback']::text[] THEN ARRAY['read']::text[]"
        " ELSE array_remove(scopes, 'feedback') END WHERE 'feedback' = ANY(scopes)"
    )
    _scope_check(SCOPES_BEFORE)
    op.execute(f"GRANT INSERT ({APP_INSERTABLE}) ON api_keys TO {role}")
    op.execute(f"GRANT USAGE, SELECT ON SEQUENCE api_keys_id_seq TO {role}")
    op.execute(f"DROP FUNCTION IF EXISTS livingrag_api_key_create({CREATE_ARGS})")
    op.execute("DROP TRIGGER IF EXISTS api_keys_revoked_once ON api_keys")
    op.execute("DROP FUNCTION IF EXISTS livingrag_api_key_revoked_once()")
    op.execute("DROP TRIGGER IF EXISTS passages_mark_stale_on_delete ON passages")
    op.execute("DROP TRIGGER IF EXISTS passages_mark_stale_on_update ON passages")
    op.execute("DROP FUNCTION IF EXISTS livingrag_passages_changed()")
