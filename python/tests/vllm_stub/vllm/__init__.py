"""A stub of the few vLLM modules fluxon.vllm.connector imports, written for the tests from
the documented interface of vLLM 13f4ad0f (see ../interface-13f4ad0f.txt); not vLLM."""
