"""Host-side helpers under TileLang's module names (`tilecore.utils.tensor`)."""
