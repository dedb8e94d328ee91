"""damacy's warning classes."""


class DamacyWarning(UserWarning):
    """Base class of damacy's warnings."""


class FallbackWarning(DamacyWarning):
    """``damacy.GpuCodecPipeline`` handed a read to zarr-python's ``BatchedCodecPipeline``.

    Silence with ``warnings.simplefilter("ignore", damacy.FallbackWarning)``; make it an
    error with ``zarr.config.set({"codec_pipeline.strict": True})``.
    """
