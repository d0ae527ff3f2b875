"""Moved to the ground floor: :mod:`empirical.common.files` (importing a name from here warns
``DeprecationWarning``, removed in 0.3)."""
from empirical.common.deprecation import moved_names

__getattr__ = moved_names("empirical.files", dict.fromkeys(
    ("atomic_path", "check_write_target", "check_input_file", "open_input", "read_input_bytes", "read_input_text",
     "naming_write_errors", "atomic_write_bytes", "atomic_write_text", "write_json", "write_csv", "save_figure",
     "sha256_file", "ChecksumError", "checksum_path", "write_checksum", "verify_checksum", "check_path", "cache_root",
     "env_path", "refuse_overwriting_inputs", "parse_json", "read_json", "json_ready", "MiB", "MAX_JSON_BYTES",
     "MAX_TABLE_BYTES", "MAX_ARRAY_BYTES", "MAX_MODEL_FILE_BYTES", "MAX_JSON_DEPTH"), "empirical.common.files"))
