"""Row-level security is forced on every tenant table, and the owner reaches rows only on purpose.

Until now RLS was enabled, not forced: the tables' owner (the role that runs the migrations and
``Database.owner_session``) bypassed every policy, so any owner connection saw and wrote every
tenant's rows. ``FORCE ROW LEVEL SECURITY`` subjects the owner to the policies too; an owner
session that names a tenant (``livingrag.tenant_id``) sees that tenant, one that names none sees
nothing.

The few owner-level maintenance paths (tenant administration, crash recovery of write-backs,
cross-tenant expiry/prune/stats, scope-index planning) need every tenant's rows. They get one
explicit route: the policy ``owner_maintenance`` on each table, which applies only to the table's
owner (``TO <owner>``: the application role and its login roles never match it, whatever they
set) and only in a transaction that set ``livingrag.maintenance = 'on'``, which
``Database.owner_session`` does and nothing else in the code may (``tests/db/test_owner_route.py``).

``livingrag_api_key_grant`` (SECURITY DEFINER, runs as the owner) resolves a key before any tenant
is known, so it sets ``livingrag.maintenance`` for its own duration (in plpgsql: a non-superuser
may not attach a custom setting to a function) and still returns only (tenant, key id, scopes) of
one exact hash.

A superuser bypasses RLS even when it is forced; this revision matters for a non-superuser owner
(the production setup). Downgrade removes the policy, un-forces RLS and restores the function.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import context, op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FORCED = (
    "tenants",
    "corpora",
    "passages",
    "sentences",
    "entities",
    "entity_sentences",
    "passage_entities",
    "passage_links",
    "experiences",
    "experience_entities",
    "writeback_log",
    "query_log",
    "api_keys",
)
MAINTENANCE = "current_setting('livingrag.maintenance', true) = 'on'"

GRANT_BODY = """
            WITH k AS (
              SELECT id, tenant_id, scopes, last_used_at FROM api_keys
              WHERE api_keys.key_hash = livingrag_api_key_grant.key_hash
                AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
            ), touched AS (
              UPDATE api_keys a SET last_used_at = now() FROM k
              WHERE a.id = k.id AND (k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute')
                AND (a.last_used_at IS NULL OR a.last_used_at < now() - interval '1 minute')
              RETURNING a.id
            )
            SELECT k.tenant_id, k.id, k.scopes FROM k
"""


def _app_role() -> str:
    role = context.config.attributes.get("app_role", "livingrag_app") if context.config else "livingrag_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"invalid application role name {role!r}")
    return role


def _schema() -> str:
    bind = op.get_bind()
    schema = bind.exec_driver_sql("SELECT current_schema()").scalar_one()
    return f'"{schema}"'


def _owner(table: str) -> str:
    """The table's owner, quoted: the one role the maintenance policy applies to."""
    bind = op.get_bind()
    owner = bind.exec_driver_sql(
        f"SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = '{table}'::regclass"
    ).scalar_one()
    return '"' + owner.replace('"', '""') + '"'


def _grant_function(*, maintenance: bool) -> None:
    role = _app_role()
    if maintenance:
        # plpgsql, not a SET clause: a non-superuser may not attach a custom setting to a function.
        # The prior value is put back before returning (an error aborts the transaction instead).
        body = f"""
          LANGUAGE plpgsql VOLATILE SECURITY DEFINER
          SET search_path = {_schema()}, pg_temp
          AS $$
          #variable_conflict use_column
          DECLARE prior text := current_setting('livingrag.maintenance', true);
          BEGIN
            PERFORM set_config('livingrag.maintenance', 'on', true);
            RETURN QUERY {GRANT_BODY};
            PERFORM set_config('livingrag.maintenance', coalesce(prior, ''), true);
          END $$;"""
    else:
        body = f"""
          LANGUAGE sql VOLATILE SECURITY DEFINER
          SET search_path = {_schema()}, pg_temp
          AS $${GRANT_BODY}          $$;"""
    op.execute("DROP FUNCTION IF EXISTS livingrag_api_key_grant(text)")
    op.execute(
        f"""
        CREATE FUNCTION livingrag_api_key_grant(key_hash text)
          RETURNS TABLE (tenant_id bigint, key_id bigint, scopes text[]){body}
        REVOKE ALL ON FUNCTION livingrag_api_key_grant(text) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION livingrag_api_key_grant(text) TO {role};
        """
    )


def upgrade() -> None:
    for table in FORCED:
        op.execute(
            f"CREATE POLICY owner_maintenance ON {table} AS PERMISSIVE FOR ALL TO {_owner(table)} "
            f"USING ({MAINTENANCE}) WITH CHECK ({MAINTENANCE})"
        )
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    _grant_function(maintenance=True)


def downgrade() -> None:
    _grant_function(maintenance=False)
    for table in reversed(FORCED):
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"DROP POLICY IF EXISTS owner_maintenance ON {table}")
