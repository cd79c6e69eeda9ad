# Shared by the benchmarks that run rounds side by side (sourced, not run).
#
#   median VALUE...    prints the median (the lower one of an even count)
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
