#include "actors/messages.hpp"

#include "actors/frontend_actor.hpp"

namespace aerie::actors {

void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<SubmitRequest>("aerie.SubmitRequest");
  cfg.add_message_type<SubmitGroup>("aerie.SubmitGroup");
  cfg.add_message_type<RequestDone>("aerie.RequestDone");
  cfg.add_message_type<AbortRequest>("aerie.AbortRequest");
  cfg.add_message_type<TokenChunk>("aerie.TokenChunk");
  cfg.add_message_type<GetLoad>("aerie.GetLoad");
  cfg.add_message_type<LoadReport>("aerie.LoadReport");
  cfg.add_message_type<transport::BatchMessage>("aerie.BatchMessage");
  cfg.add_message_type<transport::BatchResult>("aerie.BatchResult");
  cfg.add_message_type<ClientLine>("aerie.ClientLine");
  cfg.add_message_type<DrainRequest>("aerie.DrainRequest");
  cfg.add_message_type<DraftExtend>("aerie.DraftExtend");
  cfg.add_message_type<DraftExtendVerified>("aerie.DraftExtendVerified");
  cfg.add_message_type<DraftPropose>("aerie.DraftPropose");
  cfg.add_message_type<DraftProposeAhead>("aerie.DraftProposeAhead");
  cfg.add_message_type<DraftAheadQueued>("aerie.DraftAheadQueued");
  cfg.add_message_type<DraftForget>("aerie.DraftForget");
  cfg.add_message_type<DraftChainsOnDevice>("aerie.DraftChainsOnDevice");
  cfg.add_message_type<DraftCollectChains>("aerie.DraftCollectChains");
  cfg.add_message_type<DraftDeviceChains>("aerie.DraftDeviceChains");
  cfg.add_message_type<DraftDone>("aerie.DraftDone");
  cfg.add_message_type<DraftProposal>("aerie.DraftProposal");
  cfg.add_message_type<EngineFailed>("aerie.EngineFailed");
  cfg.add_message_type<PlanStep>("aerie.PlanStep");
  cfg.add_message_type<StepPlan>("aerie.StepPlan");
  cfg.add_message_type<StepOutcome>("aerie.StepOutcome");
  cfg.add_message_type<WorkArrived>("aerie.WorkArrived");
  cfg.add_message_type<CollectRemoteResult>("aerie.CollectRemoteResult");
  cfg.add_message_type<WorkerStop>("aerie.WorkerStop");
  cfg.add_message_type<BatchWorkDone>("aerie.BatchWorkDone");
  cfg.add_message_type<DpSchedulers>("aerie.DpSchedulers");
}

}  // namespace aerie::actors
