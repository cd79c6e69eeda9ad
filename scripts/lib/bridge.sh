# Shared by scripts/failover.sh and scripts/deploy-check.sh (sourced, not
# run): hosts on one switch, each in a network namespace of its own, so
# that every message between them crosses real TCP.
#
#   bridge_up PREFIX NAME=ADDRESS...
#
# Namespace PREFIX-sw holds the bridge; namespace PREFIX-NAME holds host
# NAME at ADDRESS/24, its veth's other end on the bridge (as
# PREFIX-NAME-sw, so that setting that end down cuts the host off).
# Interface names are at most 15 characters: keep PREFIX-NAME-sw short.
bridge_up() {
  local p=$1 pair name addr
  shift
  ip netns add "$p-sw"
  ip -n "$p-sw" link add br0 type bridge
  ip -n "$p-sw" link set br0 up
  for pair in "$@"; do
    name=${pair%%=*}
    addr=${pair#*=}
    ip netns add "$p-$name"
    ip -n "$p-$name" link set lo up
    ip link add "$p-$name" type veth peer name "$p-$name-sw"
    ip link set "$p-$name" netns "$p-$name"
    ip link set "$p-$name-sw" netns "$p-sw"
    ip -n "$p-sw" link set "$p-$name-sw" master br0 up
    ip -n "$p-$name" addr add "$addr/24" dev "$p-$name"
    ip -n "$p-$name" link set "$p-$name" up
  done
}
