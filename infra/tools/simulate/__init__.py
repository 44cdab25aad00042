"""`gpu-platform simulate`: replay a job trace against what a stack deploys.

trace (the CSV and its checks) -> model (read from the synthesized objects) -> engine (the
discrete-event simulation) -> report (jobs.csv, segments.csv, summary.json, report.md and plots).
"""
