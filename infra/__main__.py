"""The Pulumi program: load the stack's spec, build the platform, export what users need next."""

from infra.program import main

main()
