"""OpenRLHF's `train_ppo_ray` flags, as tables: today's (0.11.2, the audited version; tests/audit/
test_openrlhf.py checks them against the installed parser) and the older flat flags, each mapped to
today's with the OpenRLHF version that renamed it, for scripts written before the rename.

- RENAMED_0_10_2: the flat flags of 0.10.1 and their dotted names since 0.10.2 (OpenRLHF commit
  ed62d0e2, "dotted config hierarchy": openrlhf/cli/train_ppo_ray.py at 33f9d72f against 64c1cc4f).
- EARLIER: flags renamed before that, with the version and the value they stand for.
- DROPPED: flags OpenRLHF removed without a successor; none of them touches the KL term.
- ENGINE_CORRECTION: 0.10's `--vllm_is_correction_type` (0.10.2: `--algo.advantage.is_correction_type`)
  schemes as 0.11.2's level and mode (its parser's comment: TIS = token clip, ICEPOP = token mask,
  seq-mask-tis = seq mask), switched on by `--enable_vllm_is_correction`
  (0.10.2: `--algo.advantage.is_correction_enable`).
"""

# today's flags without a value (store_true / store_false), and those that take one
SWITCHES = """
train.colocate_actor_ref train.colocate_critic_reward train.colocate_all vllm.sync_with_ray
vllm.enable_prefix_caching vllm.enforce_eager vllm.enable_sleep train.async_enable
train.partial_rollout_enable ckpt.save_hf ckpt.disable_ds ckpt.load_enable ds.use_universal_ckpt
actor.gradient_checkpointing_enable ds.deepcompile train.enable_ema ds.adam_offload ds.use_liger_kernel
ds.overlap_comm actor.gradient_checkpointing_reentrant data.disable_fast_tokenizer ds.enable_sleep
ds.packing_samples train.dynamic_batch_enable ds.load_in_4bit reward.normalize_enable
train.full_determinism_enable critic.save_value_network algo.kl.unbiased_gradient actor.muon.nesterov
actor.muon.no_nesterov critic.muon.nesterov critic.muon.no_nesterov algo.kl.use_loss
algo.advantage.no_std_norm ref.offload reward.offload data.apply_chat_template algo.dynamic_filtering_enable
actor.freeze_visual_encoder use_ms
""".split()
VALUED = """
ref.num_nodes ref.num_gpus_per_node reward.num_nodes reward.num_gpus_per_node actor.num_nodes
actor.num_gpus_per_node critic.num_nodes critic.num_gpus_per_node vllm.num_engines vllm.tensor_parallel_size
vllm.sync_backend vllm.gpu_memory_utilization algo.advantage.is_correction_level
algo.advantage.is_correction_mode algo.advantage.is_correction_gating algo.advantage.is_correction_threshold
train.async_queue_size eval.steps ckpt.save_steps logger.logging_steps ckpt.path ckpt.max_num ckpt.max_mem
ckpt.best_metric_key local_rank ds.zero_stage ds.param_dtype train.ema_beta ds.zpg ds.attn_implementation
ds.experts_implementation ds.grad_accum_dtype data.dataloader_num_workers ds.tensor_parallel_size
rollout.max_tokens_per_gpu train.max_tokens_per_gpu ds.lora.rank ds.lora.alpha ds.lora.target_modules
ds.lora.dropout ckpt.output_dir train.num_episodes rollout.batch_size rollout.vllm_generate_batch_size
rollout.micro_batch_size train.max_epochs data.max_len rollout.max_new_tokens data.max_samples actor.eps_clip
actor.eps_clip_low_high actor.dual_clip critic.value_clip algo.advantage.lambd algo.advantage.gamma
train.micro_batch_size train.batch_size rollout.top_p rollout.temperature train.seed critic.freezing_steps
rollout.n_samples_per_prompt algo.kl.target algo.kl.horizon algo.kl.init_coef actor.policy_loss_type
actor.loss_agg_mode algo.kl.estimator actor.aux_loss_coef actor.entropy_coef reward.clip_range actor.optim
actor.muon.lr actor.muon.momentum actor.muon.ns_steps actor.adam.lr actor.adam.betas actor.adam.eps
actor.adam.weight_decay actor.lr_scheduler actor.lr_warmup_ratio actor.min_lr_ratio actor.max_norm
critic.optim critic.muon.lr critic.muon.momentum critic.muon.ns_steps critic.adam.lr critic.adam.betas
critic.adam.eps critic.adam.weight_decay critic.lr_scheduler critic.lr_warmup_ratio critic.min_lr_ratio
critic.max_norm algo.advantage.estimator reward.overlong_buffer_len reward.overlong_penalty_factor
reward.stop_properly_penalty_coef ds.ring_attn_size ds.ring_attn_head_stride actor.model_name_or_path
reward.model_name_or_path reward.remote_url critic.model_name_or_path ds.value_head_prefix
train.agent_func_path data.prompt_dataset data.prompt_probs data.prompt_split eval.dataset eval.split
eval.temperature eval.n_samples_per_prompt data.input_key data.label_key data.input_template logger.wandb.key
logger.wandb.org logger.wandb.group logger.wandb.project logger.wandb.run_name algo.dynamic_filtering_range
data.image_key data.max_images_per_prompt logger.tensorboard_dir
""".split()
RENAMED_0_10_2 = dict(
    line.split()
    for line in """
ref_num_nodes ref.num_nodes
ref_num_gpus_per_node ref.num_gpus_per_node
reward_num_nodes reward.num_nodes
reward_num_gpus_per_node reward.num_gpus_per_node
colocate_actor_ref train.colocate_actor_ref
actor_num_nodes actor.num_nodes
actor_num_gpus_per_node actor.num_gpus_per_node
critic_num_nodes critic.num_nodes
critic_num_gpus_per_node critic.num_gpus_per_node
colocate_critic_reward train.colocate_critic_reward
colocate_all_models train.colocate_all
vllm_num_engines vllm.num_engines
vllm_tensor_parallel_size vllm.tensor_parallel_size
vllm_sync_backend vllm.sync_backend
vllm_sync_with_ray vllm.sync_with_ray
enable_prefix_caching vllm.enable_prefix_caching
enforce_eager vllm.enforce_eager
vllm_enable_sleep vllm.enable_sleep
vllm_gpu_memory_utilization vllm.gpu_memory_utilization
vllm_is_truncated_threshold algo.advantage.is_correction_threshold
async_train train.async_enable
async_queue_size train.async_queue_size
partial_rollout train.partial_rollout_enable
eval_steps eval.steps
save_steps ckpt.save_steps
logging_steps logger.logging_steps
ckpt_path ckpt.path
save_hf_ckpt ckpt.save_hf
disable_ds_ckpt ckpt.disable_ds
max_ckpt_num ckpt.max_num
max_ckpt_mem ckpt.max_mem
load_checkpoint ckpt.load_enable
best_metric_key ckpt.best_metric_key
use_ds_universal_ckpt ds.use_universal_ckpt
zero_stage ds.zero_stage
gradient_checkpointing actor.gradient_checkpointing_enable
deepcompile ds.deepcompile
param_dtype ds.param_dtype
enable_ema train.enable_ema
ema_beta train.ema_beta
zpg ds.zpg
adam_offload ds.adam_offload
attn_implementation ds.attn_implementation
use_liger_kernel ds.use_liger_kernel
grad_accum_dtype ds.grad_accum_dtype
overlap_comm ds.overlap_comm
gradient_checkpointing_use_reentrant actor.gradient_checkpointing_reentrant
disable_fast_tokenizer data.disable_fast_tokenizer
dataloader_num_workers data.dataloader_num_workers
deepspeed_enable_sleep ds.enable_sleep
ds_tensor_parallel_size ds.tensor_parallel_size
packing_samples ds.packing_samples
use_dynamic_batch train.dynamic_batch_enable
rollout_max_tokens_per_gpu rollout.max_tokens_per_gpu
train_max_tokens_per_gpu train.max_tokens_per_gpu
load_in_4bit ds.load_in_4bit
lora_rank ds.lora.rank
lora_alpha ds.lora.alpha
target_modules ds.lora.target_modules
lora_dropout ds.lora.dropout
save_path ckpt.output_dir
num_episodes train.num_episodes
rollout_batch_size rollout.batch_size
vllm_generate_batch_size rollout.vllm_generate_batch_size
micro_rollout_batch_size rollout.micro_batch_size
max_epochs train.max_epochs
max_len data.max_len
max_new_tokens rollout.max_new_tokens
max_samples data.max_samples
max_norm actor.max_norm
l2 actor.adam.weight_decay
eps_clip actor.eps_clip
eps_clip_low_high actor.eps_clip_low_high
dual_clip actor.dual_clip
value_clip critic.value_clip
lambd algo.advantage.lambd
gamma algo.advantage.gamma
micro_train_batch_size train.micro_batch_size
train_batch_size train.batch_size
normalize_reward reward.normalize_enable
top_p rollout.top_p
temperature rollout.temperature
seed train.seed
full_determinism train.full_determinism_enable
freezing_actor_steps critic.freezing_steps
n_samples_per_prompt rollout.n_samples_per_prompt
save_value_network critic.save_value_network
actor_learning_rate actor.adam.lr
critic_learning_rate critic.adam.lr
lr_warmup_ratio actor.lr_warmup_ratio
lr_scheduler actor.lr_scheduler
kl_target algo.kl.target
kl_horizon algo.kl.horizon
init_kl_coef algo.kl.init_coef
policy_loss_type actor.policy_loss_type
kl_estimator algo.kl.estimator
aux_loss_coef actor.aux_loss_coef
entropy_loss_coef actor.entropy_coef
adam_betas actor.adam.betas
reward_clip_range reward.clip_range
advantage_estimator algo.advantage.estimator
use_kl_loss algo.kl.use_loss
no_advantage_std_norm algo.advantage.no_std_norm
overlong_buffer_len reward.overlong_buffer_len
overlong_penalty_factor reward.overlong_penalty_factor
stop_properly_penalty_coef reward.stop_properly_penalty_coef
ring_attn_size ds.ring_attn_size
ring_head_stride ds.ring_attn_head_stride
pretrain actor.model_name_or_path
reward_pretrain reward.model_name_or_path
remote_rm_url reward.remote_url
critic_pretrain critic.model_name_or_path
value_head_prefix ds.value_head_prefix
ref_reward_offload ref.offload
agent_func_path train.agent_func_path
prompt_data data.prompt_dataset
prompt_data_probs data.prompt_probs
prompt_split data.prompt_split
eval_dataset eval.dataset
eval_split eval.split
eval_temperature eval.temperature
eval_n_samples_per_prompt eval.n_samples_per_prompt
input_key data.input_key
label_key data.label_key
input_template data.input_template
apply_chat_template data.apply_chat_template
use_wandb logger.wandb.key
wandb_org logger.wandb.org
wandb_group logger.wandb.group
wandb_project logger.wandb.project
wandb_run_name logger.wandb.run_name
dynamic_filtering algo.dynamic_filtering_enable
dynamic_filtering_reward_range algo.dynamic_filtering_range
image_key data.image_key
max_images_per_prompt data.max_images_per_prompt
freeze_visual_encoder actor.freeze_visual_encoder
use_tensorboard logger.tensorboard_dir
""".splitlines()
    if line
)
# old flag -> (today's flag, the value it stands for or None: its own, the version that renamed it)
EARLIER = {
    "use_kl_estimator_k3": ("algo.kl.estimator", "k3", "0.7.0 (as --kl_estimator k3)"),
    "generate_max_len": ("rollout.max_new_tokens", None, "0.9.10 (as --max_new_tokens)"),
}
# old flag -> the version that dropped it
DROPPED = {
    "disable_trace_cache": "0.6.0",
    "pretrain_data": "0.8.0",
    "pretrain_data_probs": "0.8.0",
    "pretrain_split": "0.8.0",
    "torch_compile": "0.8.0",
    "flash_attn": "0.9.0",
    "bf16": "0.9.10",
    "prompt_max_len": "0.9.10",
    "actor_init_on_gpu": "0.10.2",
    "ptx_coef": "0.10.2",
    "perf": "0.10.2",
}
ENGINE_CORRECTION_SWITCHES = ("enable_vllm_is_correction", "algo.advantage.is_correction_enable")
ENGINE_CORRECTION_TYPES = ("vllm_is_correction_type", "algo.advantage.is_correction_type")
ENGINE_CORRECTION = {"tis": ("token", "clip"), "icepop": ("token", "mask"), "seq-mask-tis": ("seq", "mask")}
