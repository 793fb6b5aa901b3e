"""Stub of vllm.distributed.parallel_state: the TP rank of this worker (tests set it)."""
TP_RANK = 0


def get_tensor_model_parallel_rank():
    return TP_RANK
