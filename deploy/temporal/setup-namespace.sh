#!/bin/sh
# The namespace and the search attributes the workflow sets, on a running server; safe to run again (what exists
# is left as it is). Run by the compose file's temporal-namespace service, with the temporal CLI of admin-tools.
#   TEMPORAL_ADDRESS   the frontend, host:port
#   NAMESPACE          the namespace the workers poll (TEMPORAL_NAMESPACE of the workers)
#   RETENTION          how long a closed ticket's history is kept, for a namespace created here (e.g. 720h)
#   SEARCH_ATTRIBUTES  "Name=Type Name=Type ...", the workflow's search attributes
set -eu
: "${TEMPORAL_ADDRESS:?}" "${NAMESPACE:?}" "${RETENTION:?}" "${SEARCH_ATTRIBUTES:?}"

# A new server answers its health check before the namespace registry has caught up with a namespace just made:
# every step is retried, for up to two minutes.
retry() {
    tries=0
    until "$@"; do
        tries=$((tries + 1))
        [ "$tries" -lt 60 ] || { echo "gave up: $*" >&2; return 1; }
        sleep 2
    done
}
cli() { temporal --address "$TEMPORAL_ADDRESS" "$@"; }

retry cli operator cluster health >/dev/null
if cli operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; then
    echo "namespace $NAMESPACE exists"
else
    retry cli operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION"
    echo "namespace $NAMESPACE created, retention $RETENTION"
fi

registered() { cli operator search-attribute list --namespace "$NAMESPACE" -o json 2>/dev/null | grep -q "\"$1\":"; }
attribute() { registered "$1" || cli operator search-attribute create --namespace "$NAMESPACE" --name "$1" --type "$2"; }
for pair in $SEARCH_ATTRIBUTES; do
    retry attribute "${pair%%=*}" "${pair#*=}"
    echo "search attribute ${pair%%=*} (${pair#*=}) registered"
done
