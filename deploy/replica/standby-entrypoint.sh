#!/bin/sh
# A hot standby of the compose primary (docker-compose's db-replica service), on the same
# pgvector image: on a new volume, copy the primary with pg_basebackup -R (standby.signal and
# primary_conninfo written for it) as livingrag_replicator (deploy/postgres-init/20-...), then run
# PostgreSQL on the copy. It streams the primary's WAL and answers read-only queries; the app
# reads from it through LIVINGRAG_DB__READ_URLS as livingrag_web (the primary's roles, replicated).
# Needs LIVINGRAG_REPLICATION_PASSWORD; LIVINGRAG_PRIMARY_HOST (default db) names the primary.
set -eu
: "${LIVINGRAG_REPLICATION_PASSWORD:?set LIVINGRAG_REPLICATION_PASSWORD}"
PRIMARY="${LIVINGRAG_PRIMARY_HOST:-db}"
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
export PGDATA
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready -q -h "$PRIMARY" -p 5432 -U livingrag_replicator; do
    echo "standby: waiting for the primary $PRIMARY"
    sleep 2
  done
  mkdir -p "$PGDATA"
  chown postgres:postgres "$PGDATA"
  chmod 700 "$PGDATA"
  # -R keeps the connection (password included) in postgresql.auto.conf: the volume is the replica's own
  PGPASSWORD="$LIVINGRAG_REPLICATION_PASSWORD" gosu postgres \
    pg_basebackup -h "$PRIMARY" -p 5432 -U livingrag_replicator -D "$PGDATA" -R -X stream -c fast -w
fi
# hot_standby_feedback: the primary keeps the rows a long read here (a graph load) still needs
exec gosu postgres postgres -D "$PGDATA" -c hot_standby=on -c hot_standby_feedback=on
