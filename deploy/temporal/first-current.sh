#!/bin/sh
# Make the workers' build the Worker Deployment's current version when the deployment has none: a new deployment
# routes tickets to no build until one is current (docs/rollouts.md), so a first `docker compose up` would start
# tickets that nothing runs. A deployment that has a current version is left as it is: a later build is made
# current by the rollout's steps, once it is beside the last and the last's tickets can move. Safe to run again.
# Run by the compose file's temporal-deployment service, with the temporal CLI of admin-tools.
#   TEMPORAL_ADDRESS   the frontend, host:port
#   NAMESPACE          the namespace the workers poll
#   AGENT_DEPLOYMENT   the workers' Worker Deployment
#   AGENT_BUILD_ID     the workers' build
set -eu
: "${TEMPORAL_ADDRESS:?}" "${NAMESPACE:?}" "${AGENT_DEPLOYMENT:?}" "${AGENT_BUILD_ID:?}"

cli() { temporal --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE" "$@"; }
described() { cli worker deployment describe --name "$AGENT_DEPLOYMENT" -o json 2>/dev/null; }

# The server knows a version once one of its workers has polled, and refuses to make current one it does not know.
tries=0
until described | grep -Eq "\"BuildID\": *\"$AGENT_BUILD_ID\""; do
    tries=$((tries + 1))
    [ "$tries" -lt 90 ] || { echo "gave up: no worker of $AGENT_DEPLOYMENT.$AGENT_BUILD_ID has polled" >&2; exit 1; }
    sleep 2
done
if described | grep -Eq '"currentVersionBuildID": *"[^"]'; then
    echo "$AGENT_DEPLOYMENT has a current version: left as it is"
else
    cli worker deployment set-current-version --deployment-name "$AGENT_DEPLOYMENT" --build-id "$AGENT_BUILD_ID" --yes
    echo "$AGENT_DEPLOYMENT.$AGENT_BUILD_ID made current"
fi
