"""The AAAC actor-critic network in plain torch: state encoder, policy heads, two critics and a reflection head."""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from torch import nn

from agentic_ray.graph_spec import TOOL_NODE_TYPE, ActionLayout, GraphSpec, evidence_width
from agentic_ray.models.flat_mlp_encoder import FlatMLPEncoder
from agentic_ray.models.hetero_gnn_encoder import HeteroGNNEncoder
from agentic_ray.models.reflection import failed_last_step
from agentic_ray.models.skill_argument_functional import member_probs, numeric_params
from agentic_ray.models.skill_argument_heads import SkillArgumentHeads, SkillArgumentLogits, mlp
from agentic_ray.models.state_encoder_output import StateEncoderOutput

__all__ = ["AAACModel", "AAACModelConfig", "build_state_encoder", "default_device"]


FIX_PRIOR_GAIN = 10.0
"""Output gain of :attr:`AAACModel.fix_prior`. An Adam step moves each table entry by about ``lr`` whatever its
gradient's scale, and only the few correction rows reach the table, so without a gain it stays small. 10 was chosen
in one-seed imitation experiments (CU rose with the gain from 0 to 10) with an earlier, table-only prior; no shipped
benchmark sweeps it, and it is not re-tuned for :class:`FixPrior`."""


def default_device() -> torch.device:
    """``cuda`` when a GPU is visible, else ``cpu``."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class AAACModelConfig(BaseModel):
    """Sizes and switches of :class:`AAACModel` (the spec and layout are passed separately)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    encoder: Literal["gnn", "flat"] = Field(
        default="gnn", description="State encoder: heterogeneous GNN or flat MLP."
    )
    hidden_dim: int = Field(
        default=88,
        gt=0,
        description="Width H of node and state embeddings (88: about 2.4M parameters on e-commerce, near the "
        "seed's 2.1M actor-critic).",
    )
    num_layers: int = Field(default=3, ge=1, description="GNN message-passing layers.")
    num_heads: int = Field(
        default=4, ge=1, description="Attention heads per relation; must divide hidden_dim."
    )
    ffn_mult: int = Field(
        default=1, ge=0, description="Feed-forward width multiplier inside each GNN layer; 0 = none."
    )
    add_reverse_relations: bool = Field(
        default=True, description="Add dst→src relations so every node type is updated."
    )
    compact_edges: bool | None = Field(
        default=None,
        description=(
            "GNN: drop padded/invalid edge slots before message passing (same outputs, about half the per-edge "
            "work, one host sync per batch). None = only for batches on the CPU (CUDA keeps static shapes)."
        ),
    )
    gnn_layer: Literal["fused", "pyg"] = Field(
        default="fused",
        description=(
            "GNN message-passing layer. 'fused': the hand-written GatedHeteroAttentionLayer (all relations in one "
            "gather/softmax/scatter); 'pyg': PyGGATv2HeteroLayer, torch_geometric HeteroConv(GATv2Conv), same "
            "attention and messages. 'fused' is the default: measured 2.2-2.8x faster at batch 1-4 (serving, env "
            "runners) and 1.07-1.24x faster for a learner step at minibatch 128-256 (benchmarks/gnn_layer.py; "
            "figures in the docstring of GatedHeteroAttentionLayer)."
        ),
    )
    modality_fusion: Literal["gated", "flat"] = Field(
        default="gated",
        description=(
            "GNN encoder, node types with image or text blocks in their features (a schema's image fields, text "
            "fields with a token size, the task text): 'gated' encodes each modality with its own sub-encoder (a "
            "CNN, a token embedding, an MLP) and fuses them by cross-attention with the task text as query, behind "
            "per-modality gates that training logs (gate_image, gate_text, gate_struct); 'flat' feeds the "
            "concatenated columns to one Linear (seed 000's flattening, the comparison). No effect without such "
            "blocks."
        ),
    )
    flat_hidden_dim: int = Field(
        default=576,
        gt=0,
        description="Hidden width of the flat-MLP encoder's trunk (2.2M parameters on e-commerce).",
    )
    flat_layers: int = Field(default=3, ge=1, description="Hidden layers of the flat-MLP encoder's trunk.")
    head_hidden_dim: int | None = Field(
        default=None, description="Hidden width of heads and critics (None: hidden_dim)."
    )
    action_scorer: Literal["tool_nodes", "state"] = Field(
        default="tool_nodes",
        description=(
            "How skill (or prototype) logits are computed. 'tool_nodes': each action is also "
            "scored from the embedding of the tool node it calls (ToolGroundedScorer), so what message passing "
            "brings to a tool (e.g. a ready goal that needs it) drives that tool's logit directly. 'state': an MLP "
            "on the pooled state only."
        ),
    )
    numeric_on_pointer: bool = Field(
        default=False,
        description=(
            "Condition each skill's numeric arguments on the node its first pointer argument chooses: a mean and "
            "log-std per candidate node (from the argument context and that node's embedding), taken at the "
            "pointer the action chose. False: they depend on the state and the skill only, so e.g. a detector's "
            "threshold cannot differ between the parts it inspects."
        ),
    )
    argument_task_context: bool = Field(
        default=False,
        description=(
            "Feed the request's task text, as the encoder's text encoder reads it (the multimodal fusion's query), "
            "to the argument heads beside the pooled state, so an argument (e.g. a detector's threshold) can depend "
            "on the task directly. Needs encoder 'gnn' and a spec with a task text (with modality_fusion 'flat' the "
            "text gets an encoder of its own, used only here)."
        ),
    )
    separate_critic_encoders: bool = Field(
        default=False,
        description="Critics read their own encoder instead of the policy's (critic regression then cannot "
        "reshape the policy's features; it wiped out an imitation policy through a shared one).",
    )
    critics_share_encoder: bool = Field(
        default=True,
        description="With separate_critic_encoders: both critics read ONE critic encoder (trained by the reward "
        "critic's optimizer and clip; the risk head keeps its own), so two critics cost what one does. False "
        "gives each critic an encoder of its own (one more encoder pass per learner step).",
    )
    reflection_source: Literal["predicted", "oracle_env"] = Field(
        default="predicted",
        description=(
            "What the policy's state gets as its diagnosis of the last failed step. 'predicted' (the default): the "
            "reflection head's softmax (detached), predicted from obs['failure_evidence'] (what the caller saw of "
            "the failure; and, with reflection_head_input='evidence_and_state', from the state computed WITHOUT "
            "the diagnosis), only on rows whose last step failed (the evidence's 'failed' flag), zeros elsewhere; "
            "the reflection head is then part of the inference-only (EnvRunner) module. 'oracle_env': "
            "obs['reflection'], the env's rule-based root cause (one-hot; privileged: it reads the world's truth "
            "and the task's ground truth). An oracle ablation only: evaluation and serving refuse a checkpoint "
            "trained with it unless asked to (--allow-oracle), and benchmark lines of such runs say oracle: true."
        ),
    )
    evidence_to_policy: bool = Field(
        default=True,
        description=(
            "The policy's state also reads obs['failure_evidence'] (what the caller saw of the last failed call: "
            "its result-code class, flags, the failed skill), beside the diagnosis. So Correction Uplift can "
            "withhold the diagnosis alone: CU = fix rate with the diagnosis minus with the same evidence and no "
            "diagnosis; the evidence uplift = evidence against neither. False: the evidence reaches the policy "
            "only through the diagnosis (the evidence-only and no-evidence conditions are then the same input)."
        ),
    )
    reflection_head_input: Literal["evidence", "evidence_and_state"] = Field(
        default="evidence",
        description=(
            "What the reflection head (the root-cause classifier) reads. 'evidence': obs['failure_evidence'] only, "
            "what the caller saw of the failed call. 'evidence_and_state': also the policy state (the "
            "reflection-free state when predicted). Measured on the quickstart's imitation (issue 13 s4): with "
            "the state the head fit the state's patterns, calling 28% of wrong entities and 2 of 5 bad "
            "parameters tool errors with p > 0.9; on the evidence alone it was right on every one."
        ),
    )
    reflection_fix_prior: bool = Field(
        default=True,
        description=(
            "The reflection input also proposes the fix directly (FixPrior): from the diagnosed root cause and the "
            "failed skill, a learned prior over the next skill, zero at start, added to the skill logits (and to "
            "each prototype's skill). Without it the diagnosis reaches the action only through the state readout, "
            "which imitation with a few dozen corrections per cause learned to ignore (CU near 0; FixPrior's "
            "docstring has the benchmark figures). Only with reflection_source='oracle_env' or "
            "reflection_head_input='evidence'."
        ),
    )
    debug_outputs: bool = Field(
        default=False, description="Inference also returns probabilities, attention and gates."
    )
    debug_top_k: int = Field(default=3, ge=1, description="How many top skills the debug outputs list.")
    device: Literal["auto", "cpu", "cuda"] = Field(default="auto", description="'auto' = cuda when present.")

    @field_validator("reflection_source", mode="before")
    @classmethod
    def _renamed_oracle(cls, v: object) -> object:
        if v == "env":
            raise ValueError(
                "reflection_source 'env' is no longer accepted: the env's privileged root cause is the oracle "
                "ablation 'oracle_env' (refused by evaluation and serving unless allowed); the default is "
                "'predicted'"
            )
        return v

    @model_validator(mode="after")
    def _heads_divide_hidden(self) -> AAACModelConfig:
        if self.hidden_dim % self.num_heads:
            raise ValueError(f"hidden_dim={self.hidden_dim} must be divisible by num_heads={self.num_heads}")
        return self

    @model_validator(mode="after")
    def _task_context_has_a_task(self) -> AAACModelConfig:
        if self.argument_task_context and self.encoder != "gnn":
            raise ValueError(
                "argument_task_context reads the task text as the gnn encoder encodes it: encoder 'gnn'"
            )
        return self

    @property
    def uses_oracle(self) -> bool:
        """True when the policy reads the env's privileged root cause (``reflection_source="oracle_env"``)."""
        return self.reflection_source == "oracle_env"

    @property
    def head_width(self) -> int:
        return self.head_hidden_dim or self.hidden_dim

    def resolved_device(self) -> torch.device:
        """The device this config asks for (``auto`` → :func:`default_device`)."""
        return default_device() if self.device == "auto" else torch.device(self.device)


def check_tool_nodes(spec: GraphSpec, layout: ActionLayout) -> None:
    """Raises unless the spec has one ``tool`` node per skill (node ``k`` = skill ``k``)."""
    if spec.max_nodes.get(TOOL_NODE_TYPE) != layout.num_skills:
        raise ValueError(
            f"action_scorer='tool_nodes' needs exactly one {TOOL_NODE_TYPE!r} node per skill "
            f"({layout.num_skills}); the spec has {spec.max_nodes.get(TOOL_NODE_TYPE)}"
        )


def build_state_encoder(
    spec: GraphSpec, config: AAACModelConfig, failure_input_dim: int | None = None, task_output: bool = False
) -> HeteroGNNEncoder | FlatMLPEncoder:
    """The encoder named by ``config.encoder``; ``failure_input_dim`` is the width of its readout's failure input
    (default: the root causes, what ``obs["reflection"]`` holds); ``task_output``: it also returns the task text's
    encoding (the policy's encoder with ``argument_task_context``; the critics read none)."""
    if config.encoder == "gnn":
        return HeteroGNNEncoder(
            spec,
            hidden_dim=config.hidden_dim,
            num_layers=config.num_layers,
            num_heads=config.num_heads,
            ffn_mult=config.ffn_mult,
            add_reverse_relations=config.add_reverse_relations,
            compact_edges=config.compact_edges,
            gnn_layer=config.gnn_layer,
            reflection_dim=failure_input_dim,
            modality_fusion=config.modality_fusion,
            task_output=task_output,
        )
    return FlatMLPEncoder(
        spec,
        hidden_dim=config.hidden_dim,
        mlp_hidden_dim=config.flat_hidden_dim,
        mlp_layers=config.flat_layers,
        reflection_dim=failure_input_dim,
    )


class FixPrior(nn.Module):
    """The fix the reflection input proposes: a prior over the next skill, ``(B, K)``, from the diagnosis ``r``
    ``(B, C)`` (root-cause probabilities; zeros without a failure or with the input off) and the failed skill's
    one-hot ``f`` ``(B, K)``:

    ``prior = FIX_PRIOR_GAIN · (r A + (r b) f + (r ⊗ f) T)``

    * ``A`` ``(C, K)``: a cause proposes a skill whatever failed (stale information: re-read; a wrong entity: the
      lookup that lists it);
    * ``b`` ``(C,)``: a cause proposes calling the failed skill again (a tool error) or not (stale information);
    * ``T`` ``(C·K, K)``: what depends on both (which re-read fits the failed write).

    All zero at start (the policy is unchanged until training moves them). Measured on the quickstart pipeline
    (seed 0, 123 first-failure pairs): with the table ``T`` alone CU was 0.24 [0.16, 0.31]; the greedy traces retried
    a stale ``refund.trigger`` and re-read a wrong entity by its wrong id, corrections the table had learned for
    other writes but could not carry over, which ``A`` and ``b`` do: with all three terms it measured 0.424 [0.341,
    0.508] over 132 pairs (``benchmarks/correction_uplift.py --seeds 0``).
    """

    def __init__(self, num_causes: int, num_skills: int) -> None:
        super().__init__()
        self.cause_skill = nn.Parameter(torch.zeros(num_causes, num_skills))
        self.cause_retry = nn.Parameter(torch.zeros(num_causes))
        self.table = nn.Parameter(torch.zeros(num_causes * num_skills, num_skills))

    def forward(self, reflection: torch.Tensor, failed_skill: torch.Tensor) -> torch.Tensor:
        outer = (reflection.unsqueeze(-1) * failed_skill.unsqueeze(-2)).flatten(1)  # (B, C·K)
        prior = reflection @ self.cause_skill + (reflection @ self.cause_retry).unsqueeze(-1) * failed_skill
        return FIX_PRIOR_GAIN * (prior + outer @ self.table)


class AAACModel(nn.Module):
    """Encoder + skill/argument heads + reward critic + risk critic + reflection head.

    Parameter groups: the encoder, policy heads, reflection head and fix prior form the *policy* group; each
    critic (with its own encoder when ``separate_critic_encoders``) is its own group.

    Args:
        spec: Graph spec of the observations.
        layout: Action layout.
        config: Sizes and switches.
        build_critics: False builds the inference-only model (no critics; no reflection head unless
            ``config.reflection_source == "predicted"``, where the policy needs it to act).
        prototype_mode: Act over prototypes (``layout.prototype_action_space()``): the heads choose a prototype,
            then its skill's entity arguments, instead of a skill and all its arguments.

    Attributes:
        reflection_enabled: The Correction-Uplift ablation switch (inference or training): False withholds the
            diagnosis whatever ``reflection_source`` (the failure evidence stays, with ``evidence_to_policy``).
        evidence_enabled: The evidence-uplift ablation switch: False withholds the failure evidence and, with it,
            the diagnosis.
    """

    NON_INFERENCE_ATTRIBUTES: tuple[str, ...] = (
        "reward_critic",
        "risk_critic",
        "reflection_head",
        "reward_critic_encoder",
        "risk_critic_encoder",
    )

    def __init__(
        self,
        spec: GraphSpec,
        layout: ActionLayout,
        config: AAACModelConfig,
        build_critics: bool = True,
        prototype_mode: bool = False,
    ) -> None:
        super().__init__()
        self.spec, self.layout, self.config = spec, layout, config
        h, hh = config.hidden_dim, config.head_width
        self.evidence_dim = evidence_width(layout.num_skills)
        failure_dim = len(spec.root_causes) + (self.evidence_dim if config.evidence_to_policy else 0)
        self.encoder = build_state_encoder(
            spec, config, failure_dim, task_output=config.argument_task_context
        )
        self.prototype_mode = prototype_mode
        if prototype_mode and (
            not layout.num_prototypes or len(layout.prototype_skills) != layout.num_prototypes
        ):
            raise ValueError(
                "prototype_mode needs an action layout with prototype_skills for every prototype"
            )
        if config.action_scorer == "tool_nodes":
            check_tool_nodes(spec, layout)
        # Prototype mode: one choice per prototype, each with its skill's entity arguments (the policy chooses the
        # entities; the prototype fixes the skill, enum values and numeric rule).
        self.policy_heads: SkillArgumentHeads = SkillArgumentHeads(
            spec,
            layout.prototype_layout() if prototype_mode else layout,
            h,
            h,
            hh,
            tool_scoring=config.action_scorer == "tool_nodes",
            choice_skills=layout.prototype_skills if prototype_mode else None,
            numeric_on_pointer=config.numeric_on_pointer,
            task_context=config.argument_task_context,
        )
        self.has_critics = build_critics
        self.reflection_enabled = True
        self.evidence_enabled = True
        self.reflection_head: nn.Module | None = None
        if build_critics:
            self.reward_critic = mlp(h, hh, 1)
            self.risk_critic = mlp(h, hh, 1)
        if build_critics or self.predicts_reflection:
            width = self.evidence_dim + (h if config.reflection_head_input == "evidence_and_state" else 0)
            self.reflection_head = mlp(width, hh, len(spec.root_causes))
        self.fix_prior: FixPrior | None = None
        if config.reflection_fix_prior:
            self.fix_prior = FixPrior(len(spec.root_causes), layout.num_skills)
        if build_critics:
            if config.separate_critic_encoders:
                self.reward_critic_encoder = build_state_encoder(spec, config)
                if not config.critics_share_encoder:
                    self.risk_critic_encoder = build_state_encoder(spec, config)

    @property
    def predicts_reflection(self) -> bool:
        """True with ``reflection_source="predicted"``: the policy's reflection input is the head's prediction."""
        return self.config.reflection_source == "predicted"

    def non_inference_attributes(self) -> tuple[str, ...]:
        """Sub-modules the inference-only model does not build (the reflection head stays when predicted)."""
        if self.predicts_reflection:
            return tuple(n for n in self.NON_INFERENCE_ATTRIBUTES if n != "reflection_head")
        return self.NON_INFERENCE_ATTRIBUTES

    # -- encoders ---------------------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """Copies and pickles leave out the cached inference path (``InferencePolicy.for_model`` builds the copy's
        own on its first fast forward): its per-thread work tables neither copy nor pickle, and AAAC's anchor
        snapshot deep-copies the learner's module after the pipeline's greedy evaluations acted with it."""
        state = super().__getstate__()
        state.pop("_inference_policy", None)
        return state

    def encode(
        self,
        obs: dict[str, torch.Tensor],
        return_debug: bool = False,
        reflection_enabled: bool | None = None,
        reflection_dropout: float = 0.0,
        evidence_enabled: bool | None = None,
        evidence_dropout: float = 0.0,
    ) -> StateEncoderOutput:
        """Policy encoder over a batch of observations; see :class:`StateEncoderOutput` for shapes.

        The readout's failure input is ``[diagnosis ‖ evidence]``: the diagnosis of the last failed step (see
        ``reflection_source``) and, with ``evidence_to_policy``, ``obs["failure_evidence"]`` itself. The three
        inputs Correction Uplift compares are distinct: both; the evidence with the diagnosis withheld
        (``reflection_enabled=False``); neither (``evidence_enabled=False``, which withholds the diagnosis too:
        it is made from the evidence).

        Args:
            obs: Batched observations.
            return_debug: Ask the encoder for attention weights and gates.
            reflection_enabled: Overrides :attr:`reflection_enabled` for this call (False = ablation: a zero
                diagnosis).
            reflection_dropout: Share of rows whose diagnosis is zeroed at random (training only: imitation uses it
                so that the same policy also learns what to do without a diagnosis).
            evidence_enabled: Overrides :attr:`evidence_enabled` for this call (False = ablation: zero evidence and
                zero diagnosis).
            evidence_dropout: Share of rows whose evidence (and diagnosis) is zeroed at random (training only).

        With ``reflection_source="predicted"`` the diagnosis is the reflection head's detached prediction on rows
        whose last step failed (zeros elsewhere); when the head also reads the state
        (``reflection_head_input="evidence_and_state"``) the output's ``reflection_free_state`` is the state
        without the failure input.
        """
        refl = obs["reflection"]
        rows = (refl.shape[0], 1)
        diag_on = self.reflection_enabled if reflection_enabled is None else reflection_enabled
        ev_on = self.evidence_enabled if evidence_enabled is None else evidence_enabled
        keep_ev = torch.full(rows, bool(ev_on), device=refl.device)
        if evidence_dropout > 0:
            keep_ev = keep_ev & (torch.rand(rows, device=refl.device) >= evidence_dropout)
        keep = keep_ev & bool(diag_on)  # no diagnosis without the evidence it is made from
        if reflection_dropout > 0:
            keep = keep & (torch.rand(rows, device=refl.device) >= reflection_dropout)
        evidence = obs["failure_evidence"]
        shown = evidence.float() * keep_ev.float() if self.config.evidence_to_policy else None

        def failure_input(diagnosis: torch.Tensor) -> torch.Tensor:
            return diagnosis if shown is None else torch.cat([diagnosis, shown.to(diagnosis.dtype)], -1)

        if not diag_on or not ev_on:
            # A withheld diagnosis, whatever its source (the head does not run).
            return self.encoder(
                {**obs, "reflection": failure_input(torch.zeros_like(refl))}, return_debug=return_debug
            )
        if not self.predicts_reflection:
            diagnosis = refl * keep.to(refl.dtype)
            enc = self.encoder({**obs, "reflection": failure_input(diagnosis)}, return_debug=return_debug)
            return self._with_fix_prior(enc, obs, diagnosis)
        head = self.reflection_head
        assert head is not None
        failed = failed_last_step(obs).unsqueeze(-1) & keep
        if self.config.reflection_head_input == "evidence":
            probs = head(evidence.float()).softmax(-1).detach()
            diagnosis = probs * failed.to(probs.dtype)
            enc = self.encoder({**obs, "reflection": failure_input(diagnosis)}, return_debug=return_debug)
            return self._with_fix_prior(enc, obs, diagnosis)

        def predicted(free_state: torch.Tensor) -> torch.Tensor:
            probs = head(torch.cat([free_state, evidence.to(free_state.dtype)], -1)).softmax(-1).detach()
            return failure_input(probs * failed.to(probs.dtype))

        return self.encoder(obs, return_debug=return_debug, reflection_fn=predicted)

    def _with_fix_prior(
        self, enc: StateEncoderOutput, obs: dict[str, torch.Tensor], reflection: torch.Tensor
    ) -> StateEncoderOutput:
        """``enc`` with ``skill_prior = fix_prior(reflection ⊗ failed skill)`` (``(B, K)``; zero on rows without a
        reflection input, so the ablation that zeroes it removes the prior too)."""
        if self.fix_prior is None:
            return enc
        k = self.layout.num_skills
        failed_skill = obs["failure_evidence"][..., -k:].to(reflection.dtype)  # the evidence ends with it
        enc.skill_prior = self.fix_prior(reflection, failed_skill)
        return enc

    def _critic_state(
        self, which: str, obs: dict[str, torch.Tensor], enc: StateEncoderOutput | None
    ) -> torch.Tensor:
        if self.config.separate_critic_encoders:
            return self.critic_encoder(which)(obs).state
        return (enc if enc is not None else self.encode(obs)).state

    def critic_encoder(self, which: str) -> nn.Module:
        """The encoder critic ``which`` (``"reward_critic"`` or ``"risk_critic"``) reads, when critics have their
        own (``separate_critic_encoders``); the risk critic reads the reward critic's when they share one."""
        if which == "risk_critic" and self.config.critics_share_encoder:
            which = "reward_critic"
        return getattr(self, f"{which}_encoder")

    def critic_values(
        self, obs: dict[str, torch.Tensor], enc: StateEncoderOutput | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(reward values, risk values)``, each ``(B,)``, running a shared encoder only once."""
        if self.config.separate_critic_encoders and self.config.critics_share_encoder:
            state = self.reward_critic_encoder(obs).state
            return self.reward_critic(state).squeeze(-1), self.risk_critic(state).squeeze(-1)
        if not self.config.separate_critic_encoders and enc is None:
            enc = self.encode(obs)
        return self.reward_values(obs, enc), self.risk_values(obs, enc)

    # -- heads ------------------------------------------------------------------------------------------
    def policy_logits(self, obs: dict[str, torch.Tensor], enc: StateEncoderOutput) -> SkillArgumentLogits:
        """Action logits; ``["packed"]`` is ``(B, D)`` (see ``skill_argument_functional``). In prototype mode the
        "skills" are the prototypes (``skill (B, num_prototypes)``, masked by ``proto_mask``) and the arguments
        are their skills' entity arguments."""
        return self.policy_heads(obs, enc)

    def reward_values(
        self, obs: dict[str, torch.Tensor], enc: StateEncoderOutput | None = None
    ) -> torch.Tensor:
        """Reward critic, ``(B,)``. ``enc`` (the policy encoder's output) is reused when trunks are shared."""
        return self.reward_critic(self._critic_state("reward_critic", obs, enc)).squeeze(-1)

    def risk_values(
        self, obs: dict[str, torch.Tensor], enc: StateEncoderOutput | None = None
    ) -> torch.Tensor:
        """Risk critic, ``(B,)``."""
        return self.risk_critic(self._critic_state("risk_critic", obs, enc)).squeeze(-1)

    def reflection_input(
        self, obs: dict[str, torch.Tensor], enc: StateEncoderOutput | None = None
    ) -> torch.Tensor:
        """The reflection head's input: ``obs["failure_evidence"]`` ``(B, E)``, after the state ``(B, H + E)``
        with ``reflection_head_input="evidence_and_state"`` (the reflection-free state when predicted, else the
        policy state; the encoder runs when ``enc`` is None)."""
        evidence = obs["failure_evidence"].float()
        if self.config.reflection_head_input == "evidence":
            return evidence
        enc = enc if enc is not None else self.encode(obs)
        state = enc.reflection_free_state if enc.reflection_free_state is not None else enc.state
        return torch.cat([state, evidence.to(state.dtype)], -1)

    def reflection_logits(
        self, obs: dict[str, torch.Tensor], enc: StateEncoderOutput | None = None
    ) -> torch.Tensor:
        """``(B, len(spec.root_causes))`` root-cause class logits (see :meth:`reflection_input` for the input)."""
        if self.reflection_head is None:
            raise ValueError(
                "this inference-only model has no reflection head (reflection_source='oracle_env')"
            )
        return self.reflection_head(self.reflection_input(obs, enc))

    def debug_outputs(self, enc: StateEncoderOutput, logits: SkillArgumentLogits) -> dict[str, Any]:
        """Per-step diagnostics for serving/inspection.

        Returns:
            ``skill_probs (B, K)``, ``top_skills``/``top_skill_probs (B, k)``; for the most likely skill
            ``pointer_probs (B, P, Mp1)``, ``member_probs (B, L, Mp)`` (a set slot's inclusion marginals; a sequence
            slot's probability of each node at its first position), ``enum_probs (B, E, Me)``, ``source_probs (B, N,
            C1)`` (0 = a free value), ``numeric_mean``/``numeric_sigma (B, N)`` (in prototype mode the "skills" are
            the prototypes, and ``prototype_probs (B, num_prototypes)`` repeats ``skill_probs``), and the encoder's
            ``attention {layer/rel: (B, E_r, heads)}`` and ``gates {layer/rel: (B, N_dst)}``.
        """
        out: dict[str, Any] = dict(enc.debug)
        pk = self.policy_heads.packed
        parts = logits["parts"]
        probs = logits["skill"].softmax(-1)
        top = probs.topk(min(self.config.debug_top_k, probs.shape[-1]), dim=-1)
        best = top.indices[:, 0]
        out["skill_probs"] = probs
        out["top_skills"] = top.indices
        out["top_skill_probs"] = top.values
        rows = torch.arange(best.shape[0], device=best.device)
        out["pointer_probs"] = parts.pointer_by_slot(pk)[rows, best].softmax(-1)
        out["enum_probs"] = parts.enum[rows, best].softmax(-1)
        out["source_probs"] = parts.source[rows, best].softmax(-1)
        mean, log_std = numeric_params(parts, pk, best, out["pointer_probs"].argmax(-1))
        out["numeric_mean"] = mean  # at the most likely pointers (they matter with numeric_on_pointer)
        out["numeric_sigma"] = log_std.exp()
        out["member_probs"] = member_probs(parts, pk)[rows, best]
        if self.prototype_mode:
            out["prototype_probs"] = probs
        return out

    # -- parameter groups -------------------------------------------------------------------------------
    def _params(self, *names: str) -> list[nn.Parameter]:
        return [p for n in names if getattr(self, n, None) is not None for p in getattr(self, n).parameters()]

    def policy_parameters(self) -> list[nn.Parameter]:
        """Encoder, policy heads, reflection head and fix prior."""
        return self._params("encoder", "policy_heads", "reflection_head", "fix_prior")

    def reward_critic_parameters(self) -> list[nn.Parameter]:
        """Reward critic head (and the critic encoder when separate, also when the risk critic shares it)."""
        return self._params("reward_critic", "reward_critic_encoder")

    def risk_critic_parameters(self) -> list[nn.Parameter]:
        """Risk critic head (and its encoder when separate)."""
        return self._params("risk_critic", "risk_critic_encoder")
