"""empirical.llm: from a transformers model to hidden-state matrices, and back by steering.

The public names are below (``from empirical.llm import load_model``); they live in underscored implementation
modules, each with one job, and are loaded on first use (PEP 562, through ``lazy_loader``), so importing
``empirical.llm`` or its public subpackage :mod:`empirical.llm.datasets` (the concept datasets and their registry)
does not import torch: only the names that run a model do, when first used.

- models and extraction: :func:`load_model` (loading, GGUF conversion, ``model_identity``), the layer convention
  and decoder blocks of the hooks (``LAYER_CONVENTION``, ``decoder_blocks``, block-path registration),
  :func:`hidden_states`, :func:`extract_dataset` and the checksummed :class:`ExtractionCache`;
- steering, split by job: GCAV's rules (``reliable_layers``, ``gcav_alpha``; no torch), the edits
  (:func:`additive_steering`, :func:`gcav_steering`) and the edit-kind registry (``EDIT_KINDS``), prompts and
  generation, the paper's measurement in probe coordinates (:func:`steer_prompts`, :func:`steering_metrics`), what the
  model says (:func:`evaluate_dataset`, with the objects it takes: what is steered, :class:`SteeringTarget`, how it is
  measured, :class:`SteeringProtocol` with its constants and gates, and how it runs, :class:`SteeringRun`; the
  settings, the answer read-out, the null's table columns, the selection of operating points and the timing
  model).

This package imports :mod:`empirical.probes`, never the reverse.
"""
import lazy_loader

#: implementation module -> the public names it defines
_EXPORTS = {
    "_models": ["SMOLLM2", "load_model", "model_identity", "source_identity", "convert_gguf"],
    "_hooks": ["LAYER_CONVENTION", "num_layers", "decoder_blocks", "register_block_path", "unregister_block_path",
               "register_encoder_type", "unregister_encoder_type"],
    "_extract": ["hidden_states", "extract_dataset", "resolve_layers"],
    "_cache": ["ExtractionCache", "CacheCorruptionError", "STORAGES"],
    "_chat_templates": ["render_chat_template"],
    "_gcav": ["P_TOWARDS", "P_AWAY", "GcavRule", "below_tau", "reliable_layers", "steerable_layers",
              "gcav_alpha"],
    "_edits": ["additive_steering", "gcav_steering", "model_positions", "NoLayerSteeredWarning"],
    "_edit_kinds": ["EditKind", "EDIT_KINDS"],
    "_prompts": ["select_prompts", "split_halves"],
    "_generation": ["generate", "compare_generations"],
    "_steering": ["steer_prompts", "steering_metrics", "hard_layers"],
    "_steering_protocol": ["SteeringProtocol", "SteeringRun", "MIN_RANDOM", "MASS_GATE", "PERPLEXITY_GATE",
                           "DISTINCT2_GATE", "passes_gates"],
    "_steering_target": ["SteeringTarget"],
    "_answer_readout": ["MIN_AUC", "MIN_MASS", "MAX_AUC_P", "check_answer_words", "answer_token_ids"],
    "_steering_settings": ["SteeringSetting", "DEFAULT_SETTING", "named_setting", "sweep_settings"],
    "_steering_eval": ["evaluate_dataset", "method_vectors", "given_vectors"],
    "_steering_null": ["NULL_COLUMNS"],
    "_steering_selection": ["select_operating_points", "default_setting"],
    "_steering_cost": ["estimate_seconds"],
}

_lazy_getattr, __dir__, __all__ = lazy_loader.attach(__name__, submodules=["datasets"], submod_attrs=_EXPORTS)
#: the optional dependencies of the [llm] extra that the implementation modules import
_LLM_EXTRA = {"torch", "transformers", "gguf", "accelerate", "jinja2"}


def __getattr__(name):
    """Load a public name on first use; a name whose module needs the missing [llm] extra says so."""
    try:
        return _lazy_getattr(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in _LLM_EXTRA:
            raise
        raise ModuleNotFoundError(f"empirical.llm.{name} needs the [llm] extra (pip install 'raptor-probes[llm]'), "
                                  f"got no module named {exc.name!r}", name=exc.name) from exc
