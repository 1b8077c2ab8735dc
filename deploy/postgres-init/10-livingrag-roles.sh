#!/bin/sh
# The roles livingrag runs as, created by the PostgreSQL superuser (docker-compose mounts this
# folder at /docker-entrypoint-initdb.d: it runs once, when the database volume is first made):
#
#   livingrag_owner  owns the database and its tables and runs the migrations; not a superuser and
#                    without BYPASSRLS, so forced row-level security binds it too (it reaches every
#                    tenant only through livingrag's owner route, Database.owner_session)
#   livingrag_web    the application's login role (LIVINGRAG_DB__APP_URL), bound by RLS
#   livingrag_app    the role the RLS policies and grants name (NOLOGIN); both are members
#
# Safe to run again (existing roles and the database are kept). Needs LIVINGRAG_OWNER_PASSWORD and
# LIVINGRAG_WEB_PASSWORD; LIVINGRAG_DB_NAME (default livingrag) names the database.
set -eu
: "${LIVINGRAG_OWNER_PASSWORD:?set LIVINGRAG_OWNER_PASSWORD}"
: "${LIVINGRAG_WEB_PASSWORD:?set LIVINGRAG_WEB_PASSWORD}"
DB="${LIVINGRAG_DB_NAME:-livingrag}"
psql -X -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres \
  -v owner_pw="$LIVINGRAG_OWNER_PASSWORD" -v web_pw="$LIVINGRAG_WEB_PASSWORD" -v db="$DB" <<'SQL'
SELECT 'CREATE ROLE livingrag_app NOLOGIN NOSUPERUSER NOBYPASSRLS'
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'livingrag_app') \gexec
SELECT format('CREATE ROLE livingrag_owner LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB PASSWORD %L', :'owner_pw')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'livingrag_owner') \gexec
SELECT format('CREATE ROLE livingrag_web LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB PASSWORD %L', :'web_pw')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'livingrag_web') \gexec
GRANT livingrag_app TO livingrag_owner, livingrag_web;
SELECT format('CREATE DATABASE %I OWNER livingrag_owner', :'db')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
\connect :"db"
CREATE EXTENSION IF NOT EXISTS vector;
SQL
