#!/bin/sh
# Lets a streaming replica (docker-compose's db-replica, deploy/replica/standby-entrypoint.sh) copy
# and follow this server: the login role livingrag_replicator with REPLICATION (not a superuser,
# no BYPASSRLS; it reads WAL, never a table through SQL) and a pg_hba.conf line that admits it for
# replication from the compose network. Run once by the image's superuser, when the volume is new,
# after 10-livingrag-roles.sh. Needs LIVINGRAG_REPLICATION_PASSWORD.
set -eu
: "${LIVINGRAG_REPLICATION_PASSWORD:?set LIVINGRAG_REPLICATION_PASSWORD}"
psql -X -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres \
  -v repl_pw="$LIVINGRAG_REPLICATION_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE livingrag_replicator LOGIN REPLICATION NOSUPERUSER NOBYPASSRLS PASSWORD %L', :'repl_pw')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'livingrag_replicator') \gexec
SQL
HBA="${PGDATA:-/var/lib/postgresql/data}/pg_hba.conf"
LINE="host replication livingrag_replicator all scram-sha-256"
grep -qxF "$LINE" "$HBA" || printf '%s\n' "$LINE" >> "$HBA"
