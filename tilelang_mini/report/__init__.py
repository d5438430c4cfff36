"""Reports on compiled and simulated kernels: schedule summaries, timelines and plots."""
