"""The Pulumi program (`python -m infra`) and the offline tooling that runs it."""
