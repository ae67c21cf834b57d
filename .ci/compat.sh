#!/usr/bin/env bash
# compat.sh SERVER...: runs the compatibility subset of the root module's
# tests against each SERVER, with real-Redis tests required. A SERVER is one
# of the sources ../shared/servers/build.sh builds (redis-6.2.16,
# redis-7.2.6, redis-7.4.1, valkey-8.0.1: built once, then cached under
# $HOME/.cache/relock-servers), "system" for the redis-server on PATH
# (Debian's 7.0), or "all" for all five.
#
# The subset (COMPAT_RUN overrides it, COMPAT_TIMEOUT the go test timeout)
# runs every script (TestScriptsLoadOnRedis loads each; the kinds' tests
# below run them), classic pub/sub on one server and on a Cluster,
# sharded pub/sub on a Cluster where the server has it (and its refusal
# where not), the least-privilege ACL, the command counters, a 3+3 Cluster
# with a master failover, and Sentinel failover.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

export PATH="$PATH:/usr/local/go/bin"
all=(redis-6.2.16 redis-7.2.6 redis-7.4.1 valkey-8.0.1 system)
servers=("$@")
[ "${#servers[@]}" -eq 0 ] && { echo "usage: $0 SERVER... | all (one of: ${all[*]})" >&2; exit 2; }
[ "${servers[0]}" = all ] && servers=("${all[@]}")

# build.sh stands in ../shared/servers beside the clone (CI), or one level
# higher (a git worktree under a directory of worktrees); RELOCK_BUILD_SH
# names it elsewhere.
build=${RELOCK_BUILD_SH:-}
for cand in "$root/../shared/servers/build.sh" "$root/../../shared/servers/build.sh"; do
  [ -z "$build" ] && [ -f "$cand" ] && build=$cand
done

run=${COMPAT_RUN:-'^(TestScriptsLoadOnRedis|TestLeastPrivilegeACL|TestUncontendedCommandsPerCycle|TestMultiLockTakesPartsOfOneRedisInOneScriptCall|TestMultiLockRechecksWhenAPartIsHandedOver|TestFairLockGrantsInRequestOrder|TestFairLockWaiterThatGivesUpLeavesTheQueue|TestFairLockForceUnlockHandsOverToTheNextWaiter|TestRWLockWriteUnlockWakesAllReaders|TestRWAbandonReleasesACrossedGrant|TestRWLockForceUnlock|TestSemaphoreAcquireRelease|TestSemaphoreWaiterGivesUp|TestSemaphoreFIFOLargeRequestFirst|TestCountDownLatchWakesWaiters|TestRedLockHoldsAMajorityAndReleasesEverywhere|TestForceUnlockFreesTheLockAndTellsTheHolder|TestTokensIncreaseAcrossRestartWithoutPersistence|TestInspectSeveralKinds|TestShardedPubSubForcedWhereRefused|TestClusterWithoutShardedPubSubUsesClassic|TestScriptsStayLoadedPastOtherEvals|TestCluster|TestClusterSemaphoreAndLatch|TestHandOverPastAKilledWaiterOnACluster|TestSentinel)$'}

export RELOCK_REQUIRE_REDIS=1
failed=()
for s in "${servers[@]}"; do
  if [ "$s" = system ]; then
    bin=$(dirname "$(command -v redis-server)")
  else
    [ -n "$build" ] || { echo "compat.sh: no shared/servers/build.sh (set RELOCK_BUILD_SH)" >&2; exit 2; }
    start=$SECONDS
    bin=$(bash "$build" "$s") # shared/ may have lost its exec bits
    echo "== $s: $bin (ready in $((SECONDS - start)) s)"
  fi
  echo "== $s: $("$bin/redis-server" --version)"
  start=$SECONDS
  if PATH="$bin:$PATH" go test -race -count=1 -timeout "${COMPAT_TIMEOUT:-15m}" -run "$run" .; then
    echo "== $s: passed in $((SECONDS - start)) s"
  else
    echo "== $s: FAILED after $((SECONDS - start)) s"
    failed+=("$s")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "compat.sh: failed on ${failed[*]}" >&2
  exit 1
fi
