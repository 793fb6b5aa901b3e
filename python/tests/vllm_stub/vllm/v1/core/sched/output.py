"""Stub of vllm.v1.core.sched.output: the fields a KV connector reads (tests only)."""
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: Optional[list]
    block_ids: tuple
    num_computed_tokens: int


@dataclass
class CachedRequestData:
    req_ids: list = field(default_factory=list)
    resumed_req_ids: set = field(default_factory=set)
    new_token_ids: list = field(default_factory=list)
    all_token_ids: dict = field(default_factory=dict)
    new_block_ids: list = field(default_factory=list)
    num_computed_tokens: list = field(default_factory=list)
    num_output_tokens: list = field(default_factory=list)


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict
    total_num_scheduled_tokens: int
    finished_req_ids: set = field(default_factory=set)
    preempted_req_ids: Optional[set] = None
    kv_connector_metadata: object = None
