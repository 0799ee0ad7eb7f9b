#!/bin/sh
# Prints pending-projector-accounts.conf adapted to a SUBJECT_PREFIX, e.g.
#   deploy/nats/prefix-accounts.sh acme. > /etc/nats/acme-accounts.conf
# The same rules as src/events/subjects.ts: every plain subject gets the prefix; streams become
# <TOKEN>_PENDING_PROJECTOR_*, the consumer <token>_pending-projector, the bucket
# <token>_pending_projector_summaries (token: the prefix without its dot, other characters than
# [A-Za-z0-9_-] as _). Inbox prefixes and the endpoints' queue group stay as they are. The account
# name KANDEV is kept: rename it when several deployments share one server (docs/security.md).
set -eu
prefix="${1:?usage: prefix-accounts.sh <prefix ending in a dot, e.g. acme.>}"
case "$prefix" in *.) ;; *) echo "the prefix must end with a dot, e.g. acme." >&2; exit 2 ;; esac
token=$(printf '%s' "${prefix%.}" | sed 's/[^A-Za-z0-9_-]/_/g')
upper=$(printf '%s' "$token" | tr '[:lower:]' '[:upper:]')
here=$(dirname "$0")
sed -E \
  -e "s/\"([a-z][^\"]*)\"/\"${prefix}\1\"/g" \
  -e "s/PENDING_PROJECTOR_/${upper}_PENDING_PROJECTOR_/g" \
  -e "s/(KV_|\\\$KV\\.)pending_projector_summaries/\1${token}_pending_projector_summaries/g" \
  -e "s/\\.pending-projector(\\.>)?\"/.${token}_pending-projector\1\"/g" \
  "$here/pending-projector-accounts.conf"
