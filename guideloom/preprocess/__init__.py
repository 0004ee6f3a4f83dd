"""``guideloom preprocess``: rddac's reference cleaning of raw measurements (placeholder of the
pointcloud branch; the core branch owns this module)."""
