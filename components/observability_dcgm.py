"""The DCGM exporter's collector list: the GPU Operator's default fields, the ECC error counters and XID counts.

The operator's default list (dcgm-exporter's etc/dcp-metrics-included.csv) leaves ECC counters commented
out, so an uncorrectable-memory alert would never see data, and has no per-code XID counts, so a fatal XID
followed at once by another code would never page. The platform ships its own list in the CSV format the
exporter reads (field, Prometheus type, help), keeping every default field so nothing a site already graphs
disappears. tests/test_observability_contract.py checks these claims against the exporter's source.
"""

from __future__ import annotations

from config.observability import DCGM_ECC_DBE_FIELD, DCGM_XID_COUNT_FIELD

CONFIG_MAP = "gpu-tenancy-dcgm-metrics"
# The exporter reads this key of the ConfigMap the ClusterPolicy's dcgmExporter.config.name names.
CONFIG_KEY = "dcgm-metrics.csv"

FIELDS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock (MHz)"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "memory clock (MHz)"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "memory temperature (C)"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (C)"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "power draw (W)"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "energy since boot (mJ)"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "PCIe replays"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "share of time the GPU was busy (%)"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "memory copy utilisation (%)"),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "encoder utilisation (%)"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "decoder utilisation (%)"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "code of the last XID error"),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "framebuffer free (MiB)"),
    ("DCGM_FI_DEV_FB_USED", "gauge", "framebuffer used (MiB)"),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "framebuffer reserved (MiB)"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "NVLink bandwidth over all lanes"),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU license status"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "rows remapped after uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "rows remapped after correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "row remapping failed"),
    ("DCGM_FI_DRIVER_VERSION", "label", "driver version"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "graphics engine active ratio"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "tensor pipe active ratio"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "memory interface active ratio"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "PCIe bytes sent"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "PCIe bytes received"),
    # Not in the default list: what GpuTenancyGpuEccErrors needs.
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "single-bit ECC errors since the last driver load"),
    (DCGM_ECC_DBE_FIELD, "counter", "double-bit ECC errors since the last driver load"),
    # Not in the default list: every XID code in the exporter's window, so a fatal code followed by another
    # still pages (components/observability_xid.py).
    (DCGM_XID_COUNT_FIELD, "counter", "XID errors per code within the exporter's window"),
)


def collectors_csv() -> str:
    return "".join(f"{name}, {kind}, {help_text}\n" for name, kind, help_text in FIELDS)
