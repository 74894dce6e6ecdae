"""Reading what perf and the kernel record: perf.data files, tracefs formats, perf rings, live listening."""
