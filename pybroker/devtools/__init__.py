"""Developer tooling, out of the kernel's way: benchmarks, chaos runs, fuzzers, demos."""
