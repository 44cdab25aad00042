"""gpu-platform components: the spec, the catalog, pure derivations and the ComponentResources."""
