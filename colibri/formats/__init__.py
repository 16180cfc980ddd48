"""Weight file formats. Pure Python + numpy: importable without the compiled core.

    safetensors.py   SafetensorsFile (one mmapped, validated file), TensorView, scan_nonfinite
    hf_dir.py        HFCheckpoint (a Hugging Face directory: config.json + single or sharded weights)
"""
