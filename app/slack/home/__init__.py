"""The App Home tab: the viewer's memory browser (`tab`), its pages (`view`, `review`, `blocks`), its
modals (`edit`, the add modal in `view`) and the state a page carries between clicks (`state`)."""
