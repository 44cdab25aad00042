"""The Pulumi program and the offline engine that runs it; the tools over its output in `tools/`.

- `program` (run by `__main__` under `pulumi up`) builds the platform for the spec's cloud;
- the offline engine: `stackfile` and `yamlfile` read stack files, `synth` runs the program
  under the Pulumi SDK's mock engine (with `mock_outputs` for what a cloud computes), and
  `output_folder` writes a command's output whole, confined to `--out`;
- `tools/`: check, review, summary and simulate, which only read what a synthesis holds;
- `cli`: the `gpu-platform` command, a thin dispatcher over the engine and the tools.

Imports: components/ and, within infra/, only down this list.
"""
