"""The GPU catalog is data; these checks keep the table internally consistent."""

from __future__ import annotations

import re
from datetime import date

import pytest

from components.facts import catalog

TYPES = list(catalog.INSTANCE_TYPES.values())

# Family -> GPU, from the clouds' instance-type pages: the table must agree with them.
FAMILY_GPU = {
    "g4dn": "T4",
    "g5": "A10G",
    "g6": "L4",
    "g6e": "L40S",
    "p4d": "A100-40GB",
    "p4de": "A100-80GB",
    "p5": "H100-80GB",
    "p5e": "H200-141GB",
    "p5en": "H200-141GB",
    "g2-standard": "L4",
    "a2-highgpu": "A100-40GB",
    "a2-megagpu": "A100-40GB",
    "a2-ultragpu": "A100-80GB",
    "a3-highgpu": "H100-80GB",
    "a3-megagpu": "H100-80GB",
    "a3-ultragpu": "H200-141GB",
}


def _family(name: str) -> str:
    return name.split(".")[0] if "." in name else name.rsplit("-", 1)[0]


def test_every_family_users_pick_today_is_in_the_catalog() -> None:
    families = {_family(t.name) for t in TYPES}
    assert set(FAMILY_GPU) <= families
    assert "n1-standard" in families


@pytest.mark.parametrize("shape", TYPES, ids=lambda t: t.name)
def test_instance_type_gpu_matches_its_family(shape: catalog.InstanceType) -> None:
    expected = FAMILY_GPU.get(_family(shape.name))
    if expected is not None:
        assert shape.gpu == expected


@pytest.mark.parametrize("shape", TYPES, ids=lambda t: t.name)
def test_instance_type_facts_are_complete(shape: catalog.InstanceType) -> None:
    assert shape.gpu in catalog.GPU_MODELS
    assert shape.gpu_counts and all(c > 0 for c in shape.gpu_counts)
    assert list(shape.gpu_counts) == sorted(shape.gpu_counts)
    assert shape.vcpus > 0 and shape.memory_gib > 0
    assert 0.1 <= shape.usd_per_hour / shape.gpus_per_node <= 20, "implausible $/GPU-hour"


@pytest.mark.parametrize("shape", [t for t in TYPES if t.cloud == "aws"], ids=lambda t: t.name)
def test_aws_types_have_built_in_gpus_and_no_gke_accelerator(shape: catalog.InstanceType) -> None:
    assert len(shape.gpu_counts) == 1
    assert shape.gke_accelerator == ""
    assert re.fullmatch(r"[a-z0-9-]+\.(\d*x?large|metal)", shape.name)


@pytest.mark.parametrize("shape", [t for t in TYPES if t.cloud == "gcp"], ids=lambda t: t.name)
def test_gcp_types_name_their_gke_accelerator(shape: catalog.InstanceType) -> None:
    assert shape.gke_accelerator.startswith("nvidia-")
    # GKE accelerator names and our labels agree, except the A3 Mega variant of the H100.
    if shape.name != "a3-megagpu-8g":
        assert shape.gke_accelerator == shape.gpu_model.accelerator_label


def test_n1_machines_attach_one_two_or_four_t4s() -> None:
    n1 = [t for t in TYPES if t.name.startswith("n1-")]
    assert n1 and all(t.gpu == "T4" and t.gpu_counts == (1, 2, 4) for t in n1)


def test_gcp_machine_names_carry_their_gpu_count() -> None:
    for shape in TYPES:
        match = re.fullmatch(r"a\d-\w+-(\d+)g", shape.name)
        if match:
            assert shape.gpu_counts == (int(match.group(1)),), shape.name


@pytest.mark.parametrize(("gpu", "tflops"), [("A100-40GB", 312), ("A100-80GB", 312), ("H100-80GB", 989), ("H200-141GB", 989), ("L4", 121)])
def test_peak_bf16_matches_nvidia_data_sheets(gpu: str, tflops: float) -> None:
    assert catalog.GPU_MODELS[gpu].peak_bf16_tflops == tflops


def test_mig_only_on_data_center_gpus_that_have_it() -> None:
    with_mig = {name for name, gpu in catalog.GPU_MODELS.items() if gpu.mig_profiles}
    assert with_mig == {"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "B200-180GB"}


@pytest.mark.parametrize("gpu", [g for g in catalog.GPU_MODELS.values() if g.mig_profiles], ids=lambda g: g.name)
def test_mig_profiles_fit_the_gpu(gpu: catalog.GpuModel) -> None:
    for profile, instances in gpu.mig_profiles.items():
        compute, memory = re.fullmatch(r"(\d)g\.(\d+)gb", profile).groups()  # type: ignore[union-attr]
        assert 1 <= instances <= 7
        assert int(compute) * instances <= 7, f"{profile}: more compute slices than the GPU has"
        # Profile names round each slice's memory up to a whole GB, so allow 1 GB per instance.
        assert int(memory) * instances <= gpu.memory_gib + instances, f"{profile}: more memory than the GPU has"
    assert max(gpu.mig_profiles.values()) == 7


def test_shapes_that_are_not_nvidia_are_not_in_the_catalog() -> None:
    assert not {catalog.family(t.name) for t in TYPES} & set(catalog.NOT_NVIDIA)


def test_efa_only_on_larger_aws_shapes() -> None:
    for shape in TYPES:
        if shape.cloud == "aws" and shape.name.endswith((".xlarge", ".2xlarge")):
            assert not shape.fast_interconnect, shape.name


def test_bigger_shapes_of_a_family_cost_more_per_node() -> None:
    by_family: dict[tuple[str, int], list[catalog.InstanceType]] = {}
    for shape in TYPES:
        by_family.setdefault((_family(shape.name), shape.gpus_per_node), []).append(shape)
    for shapes in by_family.values():
        ordered = sorted(shapes, key=lambda t: t.vcpus)
        prices = [t.usd_per_hour for t in ordered]
        assert prices == sorted(prices), [t.name for t in ordered]


def test_price_note_names_region_and_date() -> None:
    assert "estimate" in catalog.PRICE_NOTE and "us-east-1" in catalog.PRICE_NOTE and "2026" in catalog.PRICE_NOTE


# --- Kubernetes support windows -------------------------------------------------------------


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_the_default_version_is_in_standard_support_on_both_clouds_at_the_pins_date(cloud: catalog.Cloud) -> None:
    assert catalog.in_standard_support(cloud, catalog.DEFAULT_KUBERNETES_VERSION, date(2026, 12, 2))


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_every_supported_version_has_a_support_window(cloud: catalog.Cloud) -> None:
    assert set(catalog.STANDARD_SUPPORT_ENDS[cloud]) == set(catalog.SUPPORTED_KUBERNETES_VERSIONS)


def test_eks_1_33_left_standard_support_on_2026_07_29() -> None:
    assert catalog.in_standard_support("aws", "1.33", date(2026, 7, 28))
    assert not catalog.in_standard_support("aws", "1.33", date(2026, 7, 29))
