import Testing

/// Parent of every integration suite: `.serialized` makes them run one at a time,
/// so the RSS bounds of the streaming tests only see their own transfer and the
/// external clients do not compete for the two cores.
@Suite(.serialized) enum Integration {}
