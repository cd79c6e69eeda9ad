# Shared by scripts/multihost.sh and scripts/partition.sh (sourced, not
# run): a controller and three agent hosts, each in a network namespace of
# its own, joined by veth pairs so that every message crosses real TCP.
#
# The caller sets p (namespace prefix), tmp (work directory, holding
# cluster.toml), bin (binaries) and pids (an array the daemons' PIDs are
# added to). Namespace <p>-ctl holds the controller, 10.<net>.K.1 on link
# K; namespace <p>-hK holds agent hK, 10.<net>.K.2, hosting vn[4K-3..4K].

netns_up() { # net
  ip netns add "$p-ctl"
  ip -n "$p-ctl" link set lo up
  for k in 1 2 3; do
    ip netns add "$p-h$k"
    ip -n "$p-h$k" link set lo up
    ip link add "$p-c$k" type veth peer name "$p-a$k"
    ip link set "$p-c$k" netns "$p-ctl"
    ip link set "$p-a$k" netns "$p-h$k"
    ip -n "$p-ctl" addr add "10.$1.$k.1/24" dev "$p-c$k"
    ip -n "$p-h$k" addr add "10.$1.$k.2/24" dev "$p-a$k"
    ip -n "$p-ctl" link set "$p-c$k" up
    ip -n "$p-h$k" link set "$p-a$k" up
  done
}

netns_down() {
  for ns in ctl h1 h2 h3; do ip netns del "$p-$ns" 2>/dev/null || true; done
}

# A client command run in the controller's namespace.
ctl() { ip netns exec "$p-ctl" "$bin/controller" --config "$tmp/cluster.toml" "$@"; }

# The controller of $tmp/cluster.toml, then one agent per host, each
# reaching it only over its own link; returns once the controller answers.
cluster_up() { # net
  ip netns exec "$p-ctl" "$bin/controller" serve --config "$tmp/cluster.toml" 2> "$tmp/controller.log" &
  pids+=($!)
  for _ in $(seq 100); do ctl stats >/dev/null 2>&1 && break; sleep 0.1; done
  for k in 1 2 3; do
    local first=$(( (k - 1) * 4 + 1 )) last=$(( k * 4 ))
    ip netns exec "$p-h$k" "$bin/agent" --controller "10.$1.$k.1:7817" \
      --nodes "vn[$(printf %02d $first)-$(printf %02d $last)]" --cpus 4 --memory 8G \
      --secret-file "$tmp/state/secret" --record-dir "$tmp/spool-h$k" --host "h$k" \
      --sigsleep "$bin/sigsleep" 2> "$tmp/agent-h$k.log" &
    pids+=($!)
  done
}
