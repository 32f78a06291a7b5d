#!/bin/sh
# Temporal's own databases (history and visibility) on PostgreSQL, created if missing and brought to the schema
# of the admin-tools image's server release: setup-schema records version 0.0 only on a new database, and
# update-schema applies the versioned steps the database lacks, so running it again, or with a newer release's
# admin-tools before that server starts, upgrades in place. Run by the compose file's temporal-schema service.
set -eu
: "${POSTGRES_SEEDS:?}" "${POSTGRES_USER:?}" "${SQL_PASSWORD:?}"
DB_PORT=${DB_PORT:-5432}
SCHEMA=/etc/temporal/schema/postgresql/v12

tries=0
until nc -z "$POSTGRES_SEEDS" "$DB_PORT"; do
    tries=$((tries + 1))
    [ "$tries" -lt 60 ] || { echo "PostgreSQL at $POSTGRES_SEEDS:$DB_PORT did not answer" >&2; exit 1; }
    sleep 2
done

for pair in temporal:temporal temporal_visibility:visibility; do
    database=${pair%%:*}
    schema=${pair#*:}
    sql() { temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" "$@"; }
    sql --db "$database" create
    sql --db "$database" setup-schema -v 0.0
    sql --db "$database" update-schema -d "$SCHEMA/$schema/versioned"
    echo "database $database is at the schema of this release"
done
