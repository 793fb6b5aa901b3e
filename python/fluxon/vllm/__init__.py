"""fluxon.vllm: a vLLM KV connector over Fluxon (docs/vllm.md).

core.py, keys.py, holder.py, paged.py and settings.py import nothing from vLLM (keys, lookup,
load/save plans, the hostless copies, the checked kv_connector_extra_config); connector.py is
the KVConnectorBase_V1 subclass vLLM loads through kv_connector_module_path
"fluxon.vllm.connector" (it imports vLLM)."""
