"""`gpu-platform review --base REF`: what a pull request changes, as a Markdown comment.

`trees` synthesizes the base ref and the working tree (each in its own process, with its own
code) and collects a review per stack; `diff` compares two syntheses of a stack; `markdown`
renders the report.

Imports: the offline engine, the checks and everything below them.
"""
